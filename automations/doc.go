// Package automations is the pure logic of CONTRACT §9: the automation record and its strict
// decoding, its validation against a loaded agent, the fire times of each trigger kind (cron in an
// IANA timezone under the DST rules, every from a fixed anchor, at once), catch-up after downtime,
// owner scopes, the overlap decision and the signatures of event triggers.
//
// It has no HTTP and no database so that the three places that need these rules (the runtime's
// thin routes, the worker task that fires, the CLI) share one copy: a fire time computed by the
// scheduler is the same one the API shows and the same one a unique queue task is keyed on.
// Cron expressions are parsed by robfig/cron's standard 5-field parser; their evaluation is ours,
// over local wall-clock minutes, because robfig steps hours by adding real hours and so skips the
// day of a spring-forward gap and can repeat an hour at fall back.
package automations
