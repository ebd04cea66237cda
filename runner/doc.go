// Package runner serves deployed agents. Its Router maps a request's Host to a deployment (the
// persistent <slug>.<apps_domain> name to the active production deployment, the pinned
// <deployId>--<slug>.<apps_domain> name to one deployment), loads that deployment's bundle from
// the object store on first use, and hands the request to the deployment's runtime.
//
// Runners are stateless: which deployment is active is read from the database on every request
// (one indexed query), so an activation, promotion or rollback is seen by the very next request
// in every runner process, with no invalidation protocol to get wrong. What is immutable is
// cached: parsed bundles by digest and runtimes by deployment, both in bounded LRUs.
package runner
