package channelstest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Telegram is a fake Telegram Bot API: sendMessage, answerCallbackQuery, editMessageText and
// editMessageReplyMarkup under /bot<token>/, checked against Telegram's limits and answered in
// its shapes ({"ok":true,"result":...} or {"ok":false,"error_code":...,"description":...}).
type Telegram struct {
	Recorder
	// URL is the API's root, the Client's BaseURL (as https://api.telegram.org).
	URL string
	// Token is the bot token the fake accepts.
	Token string

	nextID atomic.Int64
}

// NewTelegram starts a fake Telegram Bot API on 127.0.0.1, closed when t ends.
func NewTelegram(t testing.TB) *Telegram {
	t.Helper()
	tg := &Telegram{Token: "123456789:AAE-test-token"}
	srv := httptest.NewServer(http.HandlerFunc(tg.serve))
	t.Cleanup(srv.Close)
	tg.URL = srv.URL
	return tg
}

// Telegram's limits the fake enforces.
const (
	telegramMaxText         = 4096
	telegramMaxCallbackData = 64
)

func (tg *Telegram) serve(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, _ := strings.Cut(rest, "/")
	body, _ := io.ReadAll(r.Body) // a short read is a refused call below
	status, answer := tg.answer(r, token, method, body)
	tg.record(r, method, body, status, status == http.StatusOK)
	writeJSON(w, status, answer)
}

// tgError is Telegram's error answer.
func tgError(status int, description string) (int, map[string]any) {
	return status, map[string]any{"ok": false, "error_code": status, "description": description}
}

// answer is the status and body Telegram would answer.
func (tg *Telegram) answer(r *http.Request, token, method string, body []byte) (int, map[string]any) {
	if f, ok := tg.nextFailure(); ok {
		if f.status == http.StatusTooManyRequests {
			secs := int(f.retryAfter / time.Second)
			status, answer := tgError(f.status, "Too Many Requests: retry after "+strconv.Itoa(secs))
			answer["parameters"] = map[string]any{"retry_after": secs}
			return status, answer
		}
		if f.status == http.StatusBadRequest {
			return tgError(f.status, "Bad Request: chat not found")
		}
		return tgError(f.status, http.StatusText(f.status))
	}
	if token != tg.Token {
		return tgError(http.StatusUnauthorized, "Unauthorized")
	}
	var msg struct {
		ChatID          json.RawMessage `json:"chat_id"`
		MessageID       int64           `json:"message_id"`
		CallbackQueryID string          `json:"callback_query_id"`
		Text            *string         `json:"text"`
		ReplyMarkup     *struct {
			InlineKeyboard [][]struct {
				Text         string `json:"text"`
				CallbackData string `json:"callback_data"`
			} `json:"inline_keyboard"`
		} `json:"reply_markup"`
	}
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return tgError(http.StatusBadRequest, "Bad Request: want a JSON POST")
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		return tgError(http.StatusBadRequest, "Bad Request: can't parse JSON: "+err.Error())
	}
	if msg.ReplyMarkup != nil {
		for _, row := range msg.ReplyMarkup.InlineKeyboard {
			for _, b := range row {
				if b.Text == "" {
					return tgError(http.StatusBadRequest, "Bad Request: text buttons are unallowed in the inline keyboard")
				}
				if n := len(b.CallbackData); n == 0 || n > telegramMaxCallbackData {
					return tgError(http.StatusBadRequest, "Bad Request: BUTTON_DATA_INVALID")
				}
			}
		}
	}
	chat := strings.Trim(string(msg.ChatID), `"`)
	sent := func(id int64) map[string]any {
		m := map[string]any{"message_id": id, "date": time.Now().Unix(), "chat": map[string]any{"id": json.RawMessage(msg.ChatID)}}
		if msg.Text != nil {
			m["text"] = *msg.Text
		}
		return map[string]any{"ok": true, "result": m}
	}
	needChat := method == "sendMessage" || method == "editMessageText" || method == "editMessageReplyMarkup"
	if needChat && (chat == "" || chat == "null" || chat == "0") {
		return tgError(http.StatusBadRequest, "Bad Request: chat_id is empty")
	}
	switch method {
	case "sendMessage":
		if msg.Text == nil || strings.TrimSpace(*msg.Text) == "" {
			return tgError(http.StatusBadRequest, "Bad Request: message text is empty")
		}
		if utf16Len(*msg.Text) > telegramMaxText {
			return tgError(http.StatusBadRequest, "Bad Request: message is too long")
		}
		return http.StatusOK, sent(tg.nextID.Add(1))
	case "answerCallbackQuery":
		if msg.CallbackQueryID == "" {
			return tgError(http.StatusBadRequest, "Bad Request: query is too old and response timeout expired or query ID is invalid")
		}
		return http.StatusOK, map[string]any{"ok": true, "result": true}
	case "editMessageText", "editMessageReplyMarkup":
		if msg.MessageID == 0 {
			return tgError(http.StatusBadRequest, "Bad Request: message to edit not found")
		}
		if method == "editMessageText" && (msg.Text == nil || utf16Len(*msg.Text) > telegramMaxText) {
			return tgError(http.StatusBadRequest, "Bad Request: message text is empty or too long")
		}
		return http.StatusOK, sent(msg.MessageID)
	}
	return tgError(http.StatusNotFound, "Not Found")
}
