package channels

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxCallbackData is Telegram's limit on an inline button's callback_data: 1-64 bytes. Slack's
// button value allows 2,000 characters; both platforms carry the same encoding.
const MaxCallbackData = 64

// MaxOptions is the most options a question's buttons show (ask_user allows 20; Slack's actions
// block holds 25 elements).
const MaxOptions = 25

// ErrCallbackData is wrapped by every failure to encode or decode a button's callback data.
var ErrCallbackData = errors.New("channels: bad callback data")

// Callback is what a button carries: the approval's correlation id or the question's ask id, and
// the answer (approve or deny; the index of the option chosen, so that the data stays short
// whatever the option's value: the caller maps it back through the question's options).
type Callback struct {
	Kind     ActionKind `json:"kind"`
	ID       string     `json:"id"`
	Approved bool       `json:"approved,omitempty"`
	Option   int        `json:"option,omitempty"`
}

// Encode returns the callback data of c: "a:<id>:y", "a:<id>:n" or "q:<id>:<option>", at most
// MaxCallbackData bytes. The id must be 1 or more of [A-Za-z0-9_.-] (auth.NewID's ids are), so
// that the encoding needs no escaping and the longest id is 64 - len("q::24") = 59 bytes.
func (c Callback) Encode() (string, error) {
	if err := checkCallbackID(c.ID); err != nil {
		return "", err
	}
	var answer string
	switch c.Kind {
	case ActionApproval:
		answer = "n"
		if c.Approved {
			answer = "y"
		}
	case ActionChoice:
		if c.Option < 0 || c.Option >= MaxOptions {
			return "", fmt.Errorf("%w: option %d outside 0..%d", ErrCallbackData, c.Option, MaxOptions-1)
		}
		answer = strconv.Itoa(c.Option)
	default:
		return "", fmt.Errorf("%w: kind %q is neither %q nor %q", ErrCallbackData, c.Kind, ActionApproval, ActionChoice)
	}
	data := string(c.Kind) + ":" + c.ID + ":" + answer
	if len(data) > MaxCallbackData {
		return "", fmt.Errorf("%w: id %q makes %d bytes, more than %d", ErrCallbackData, c.ID, len(data), MaxCallbackData)
	}
	return data, nil
}

// DecodeCallback reads callback data written by Encode.
func DecodeCallback(data string) (Callback, error) {
	if len(data) > MaxCallbackData {
		return Callback{}, fmt.Errorf("%w: %d bytes, more than %d", ErrCallbackData, len(data), MaxCallbackData)
	}
	kind, rest, ok1 := strings.Cut(data, ":")
	id, answer, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return Callback{}, fmt.Errorf("%w: %q is not <kind>:<id>:<answer>", ErrCallbackData, data)
	}
	if err := checkCallbackID(id); err != nil {
		return Callback{}, err
	}
	c := Callback{Kind: ActionKind(kind), ID: id}
	switch c.Kind {
	case ActionApproval:
		switch answer {
		case "y":
			c.Approved = true
		case "n":
		default:
			return Callback{}, fmt.Errorf("%w: approval answer %q is neither y nor n", ErrCallbackData, answer)
		}
	case ActionChoice:
		n, err := strconv.Atoi(answer)
		if err != nil || n < 0 || n >= MaxOptions || strconv.Itoa(n) != answer {
			return Callback{}, fmt.Errorf("%w: option %q is not a number in 0..%d", ErrCallbackData, answer, MaxOptions-1)
		}
		c.Option = n
	default:
		return Callback{}, fmt.Errorf("%w: kind %q is neither %q nor %q", ErrCallbackData, kind, ActionApproval, ActionChoice)
	}
	return c, nil
}

func checkCallbackID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty id", ErrCallbackData)
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', b == '_', b == '-', b == '.':
		default:
			return fmt.Errorf("%w: id %q has byte %q outside [A-Za-z0-9_.-]", ErrCallbackData, id, b)
		}
	}
	return nil
}
