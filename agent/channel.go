package agent

// Channel names accepted in svc.json "channels" (the messaging channels: Slack, Telegram and
// the signed generic webhook).
const (
	ChannelSlack    = "slack"
	ChannelTelegram = "telegram"
	ChannelWebhook  = "webhook"
)

// ChannelsConfig is svc.json "channels": the messaging platforms that talk to the agent. Every
// credential is an env: reference, resolved when a delivery arrives, so that an unset one fails
// only its channel.
type ChannelsConfig struct {
	Slack    *SlackChannel    `json:"slack,omitempty"`
	Telegram *TelegramChannel `json:"telegram,omitempty"`
	Webhook  *WebhookChannel  `json:"webhook,omitempty"`
}

// SlackChannel is channels.slack: the app's signing secret and bot token.
type SlackChannel struct {
	SigningSecret string `json:"signingSecret"`
	BotToken      string `json:"botToken"`
	// Agent is the named agent that answers; "" is the root agent.
	Agent string `json:"agent,omitempty"`
}

// TelegramChannel is channels.telegram: the secret_token given to setWebhook and the bot token.
type TelegramChannel struct {
	SecretToken string `json:"secretToken"`
	BotToken    string `json:"botToken"`
	Agent       string `json:"agent,omitempty"`
}

// WebhookChannel is channels.webhook: the shared signing secret and where replies are posted.
type WebhookChannel struct {
	Secret   string `json:"secret"`
	ReplyURL string `json:"replyUrl"`
	Agent    string `json:"agent,omitempty"`
}

// ChannelSetting is one credential of a channel: its svc.json field
// ("channels.slack.signingSecret") and its env: reference.
type ChannelSetting struct {
	Field string
	Value string
}

// ChannelEntry is a configured channel as the runtime reads it: the named agent that answers and
// its settings, in the order of the channel's fields.
type ChannelEntry struct {
	Agent    string
	Settings []ChannelSetting
}

// Channel returns the entry of channel name (ChannelSlack, ...), false when svc.json does not
// configure it.
func (c *ChannelsConfig) Channel(name string) (ChannelEntry, bool) {
	if c == nil {
		return ChannelEntry{}, false
	}
	field := func(f string) string { return "channels." + name + "." + f }
	switch {
	case name == ChannelSlack && c.Slack != nil:
		return ChannelEntry{Agent: c.Slack.Agent, Settings: []ChannelSetting{
			{field("signingSecret"), c.Slack.SigningSecret}, {field("botToken"), c.Slack.BotToken}}}, true
	case name == ChannelTelegram && c.Telegram != nil:
		return ChannelEntry{Agent: c.Telegram.Agent, Settings: []ChannelSetting{
			{field("secretToken"), c.Telegram.SecretToken}, {field("botToken"), c.Telegram.BotToken}}}, true
	case name == ChannelWebhook && c.Webhook != nil:
		return ChannelEntry{Agent: c.Webhook.Agent, Settings: []ChannelSetting{
			{field("secret"), c.Webhook.Secret}, {field("replyUrl"), c.Webhook.ReplyURL}}}, true
	}
	return ChannelEntry{}, false
}

// checkChannels reports every channel setting that is missing or not an env: reference.
func checkChannels(file string, cfg *ChannelsConfig, doc *jsonDoc, c *collector) {
	for _, name := range []string{ChannelSlack, ChannelTelegram, ChannelWebhook} {
		entry, ok := cfg.Channel(name)
		if !ok {
			continue
		}
		for _, s := range entry.Settings {
			if s.Value == "" {
				doc.require(c, file, s.Field, true, "an env: reference such as \"env:NAME\"")
				continue
			}
			if msg := checkEnvRef(s.Field, s.Value); msg != "" {
				c.add(file, doc.line(s.Field), "%s", msg)
			}
		}
	}
}

// checkChannelAgents reports a channel whose agent names no folder under agents/.
func (l *loader) checkChannelAgents(doc *jsonDoc) {
	for _, name := range []string{ChannelSlack, ChannelTelegram, ChannelWebhook} {
		entry, ok := l.agent.Config.Channels.Channel(name)
		if !ok || entry.Agent == "" || l.agent.Agents[entry.Agent] != nil {
			continue
		}
		field := "channels." + name + ".agent"
		l.c.add(ConfigFile, doc.line(field), "field %q: unknown agent %q: no folder agents/%s with an AGENT.md", field, entry.Agent, entry.Agent)
	}
}
