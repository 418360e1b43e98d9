// Package provider implements cordon's model providers: real clients of the
// Anthropic Messages API and of the OpenAI-compatible Chat Completions API,
// plus a replay provider that plays recorded responses from a file.
//
// # Provider-neutral API
//
// A [Request] carries a conversation of [Message] values, each a list of
// [Block] values:
//
//   - "text": Text is set.
//   - "tool_use" (assistant only): ID, Name and Input (a JSON object) are set.
//   - "tool_result" (user only): ToolUseID names the tool_use it answers,
//     Text carries the result and IsError marks a failed tool.
//
// [Provider.Complete] returns a [Response] whose Content holds only "text"
// and "tool_use" blocks. StopReason is normalized to one of "end_turn",
// "tool_use", "max_tokens", "stop_sequence" or "refusal". A Response holds
// tool_use blocks if and only if StopReason is "tool_use"; every tool_use has
// a non-empty ID unique in the response, a non-empty Name and an Input that
// is a JSON object without duplicate keys. Anything else is an error wrapping
// [ErrMalformed]: responses are parsed strictly. Unknown fields are tolerated
// (real APIs add fields), but the shapes cordon relies on must be exact, and
// unknown content block types are refused rather than skipped.
//
// # Wire formats
//
// [NewAnthropic] speaks the Anthropic Messages API: POST {BaseURL}/v1/messages
// with headers x-api-key, anthropic-version: 2023-06-01 and content-type
// application/json; tools are {name, description, input_schema}; tool calls
// come back as tool_use content blocks and go back as tool_result blocks.
// Usage comes from usage.input_tokens and usage.output_tokens, which the API
// always sends: a response without them is malformed.
//
// [NewOpenAI] speaks OpenAI Chat Completions as served by OpenAI, vLLM,
// Ollama and llama.cpp: POST {BaseURL}/chat/completions with an optional
// "Authorization: Bearer KEY"; tools are {"type":"function","function":
// {name, description, parameters}}; tool calls come back in
// choices[0].message.tool_calls with arguments as a JSON string that must
// decode to a JSON object, and results go back as role "tool" messages with
// tool_call_id. The wire format has no error flag on tool results, so a
// result with IsError is sent with its text prefixed by "error: ". Usage comes
// from usage.prompt_tokens and usage.completion_tokens; some compatible
// servers omit usage, so a response without it is accepted with zero counts
// and Usage.Reported false.
//
// # Transport
//
// Each attempt has its own timeout (Config.Timeout). Attempts are retried
// with exponential backoff (Backoff, 2×Backoff, 4×Backoff, … capped at
// [MaxWait]) on HTTP 429, 500, 502, 503, 504 and 529 and on transport errors,
// never on other statuses; a Retry-After header in seconds raises the wait,
// capped at [MaxWait]. Redirects are never followed, so the key goes only to
// the configured base URL. Response bodies larger than MaxResponseBytes are
// refused with [ErrTooLarge]. A 2xx body must have a JSON content type and be
// valid UTF-8 JSON without duplicate object keys.
//
// # Keys
//
// The API key comes from Config.Key, a [KeySource] asked once, at
// construction; the key is then held only in an unexported field. It is
// sent only in the request header, never logged, never part of a Response,
// and redacted from every error text (a hostile server may echo request
// headers back). This package never reads the environment: the caller
// chooses the source, typically an [EnvKey] whose Lookup is os.LookupEnv
// (cmd/cordon does that), so the key need not travel through the caller's
// structures. This package starts no processes; the runner must leave the
// key's variable out of every child's environment.
//
// # Replay
//
// [NewReplay] reads a file of recorded responses: JSON lines, one Response
// per line in the JSON form given by the struct tags below (blank lines are
// ignored), or a single JSON array of them. For example:
//
//	{"content":[{"type":"tool_use","id":"t1","name":"read","input":{"path":"a"}}],"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5,"reported":true},"model":"m"}
//	{"content":[{"type":"text","text":"done"}],"stop_reason":"end_turn","usage":{"input_tokens":20,"output_tokens":2,"reported":true},"model":"m"}
//
// Unknown fields are refused and every recorded response must satisfy the
// invariants above. Complete returns the responses in file order, whatever
// the request, and [ErrExhausted] once they run out.
package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"time"
)

// Tool describes a tool the model may call.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"` // a JSON object (a JSON Schema)
}

// Message is one turn of the conversation.
type Message struct {
	Role    string  `json:"role"` // "user" or "assistant"
	Content []Block `json:"content"`
}

// Block is one content block; see the package doc for which fields each
// Type uses.
type Block struct {
	Type      string          `json:"type"` // "text", "tool_use" or "tool_result"
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Request is one model call. An empty Model means Config.Model; a zero
// MaxTokens means [DefaultMaxTokens]. A positive MaxAttempts caps the HTTP
// attempts of this call, retries included, below Config.MaxRetries+1: the
// runner sets it to the model calls its budget has left.
type Request struct {
	Model       string
	System      string
	Messages    []Message
	Tools       []Tool
	MaxTokens   int
	MaxAttempts int
}

// Usage is the token usage a provider reported. Reported is false when the
// server sent no usage (only OpenAI-compatible servers may omit it); the
// counts are then zero.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	Reported     bool  `json:"reported"`
}

// Response is a model's answer. RequestID (the provider's request id,
// sanitized) and Attempts are for the journal; neither ever holds the key.
type Response struct {
	Content    []Block `json:"content"`
	StopReason string  `json:"stop_reason"`
	Usage      Usage   `json:"usage"`
	Model      string  `json:"model,omitempty"`
	RequestID  string  `json:"request_id,omitempty"`
	Attempts   int     `json:"attempts,omitempty"`
}

// Provider is a model backend. Complete must be safe for concurrent use.
type Provider interface {
	Complete(ctx context.Context, req Request) (*Response, error)
	Name() string
}

// Config configures an HTTP provider. Zero values mean the documented
// defaults.
type Config struct {
	// BaseURL is the API root: an http or https URL without query, fragment
	// or user info. Default: https://api.anthropic.com for Anthropic,
	// https://api.openai.com/v1 for OpenAI. A key is never sent over plain
	// http except to a loopback host.
	BaseURL string
	// Model is used when Request.Model is empty.
	Model string
	// Key supplies the API key, asked once by the constructor. Nil means
	// no key: OpenAI-compatible servers are then sent no Authorization
	// header (local servers); Anthropic, whose API needs a key, refuses
	// with ErrNoKey.
	Key KeySource
	// Timeout bounds each attempt, body included. Default: DefaultTimeout.
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt: 0 means
	// DefaultMaxRetries, negative means none.
	MaxRetries int
	// Backoff is the first retry's wait. Default: DefaultBackoff.
	Backoff time.Duration
	// HTTPClient is copied, and the copy refuses redirects. Nil means a
	// client on a clone of http.DefaultTransport.
	HTTPClient *http.Client
	// MaxResponseBytes caps a response body. Default: DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// KeySource supplies an HTTP provider's API key. Key returns the key, or
// an error (wrapping [ErrNoKey] when there is none); the error must not
// hold the key. A source that implements fmt.Stringer is named by it in
// errors ("$ANTHROPIC_API_KEY").
type KeySource interface {
	Key() (string, error)
}

// AnthropicKeyEnv is the variable the Anthropic key is conventionally
// read from; cmd/cordon reads it when no other is named.
const AnthropicKeyEnv = "ANTHROPIC_API_KEY"

// EnvKey is a KeySource that reads the variable Name through Lookup. The
// caller supplies Lookup (os.LookupEnv in cmd/cordon, a map in tests), so
// this package reads no environment of its own. An unset or empty
// variable is an error wrapping ErrNoKey.
type EnvKey struct {
	Name   string
	Lookup func(name string) (string, bool)
}

// Key implements KeySource.
func (e EnvKey) Key() (string, error) {
	if e.Lookup == nil {
		return "", fmt.Errorf("$%s: EnvKey has no Lookup: %w", e.Name, ErrNoKey)
	}
	k, ok := e.Lookup(e.Name)
	if !ok || k == "" {
		return "", fmt.Errorf("$%s: %w", e.Name, ErrNoKey)
	}
	return k, nil
}

// String names the variable, "$NAME".
func (e EnvKey) String() string { return "$" + e.Name }

// Defaults for zero Config and Request fields, and the cap on any wait.
const (
	DefaultTimeout          = 120 * time.Second
	DefaultMaxRetries       = 2
	DefaultBackoff          = time.Second
	DefaultMaxResponseBytes = 8 << 20
	DefaultMaxTokens        = 4096
	MaxWait                 = 60 * time.Second
)

var (
	// ErrMalformed marks a response that does not have the shape cordon
	// relies on, and a request or recording that is invalid.
	ErrMalformed = errors.New("malformed")
	// ErrTooLarge marks a response body over MaxResponseBytes.
	ErrTooLarge = errors.New("response too large")
	// ErrNoKey marks a missing key: no KeySource where one is needed, or
	// an EnvKey whose variable is unset or empty.
	ErrNoKey = errors.New("API key not set")
	// ErrExhausted marks a replay with no recorded responses left.
	ErrExhausted = errors.New("replay exhausted")
)

// HTTPError is a non-2xx answer. Message is the server's error message,
// shortened and with the key redacted.
type HTTPError struct {
	Provider  string
	Status    int
	Type      string // the API's error type, if it sent one
	Message   string
	RequestID string
	Retryable bool
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d", e.Provider, e.Status)
	if e.Status >= 300 && e.Status < 400 {
		s += " (redirect refused)"
	}
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " [request " + e.RequestID + "]"
	}
	return s
}

var (
	// Compiled on first use: at package init they cost the start of
	// every cordon process, `cordon exec` included, about 0.4 ms.
	toolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })
	toolID   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[\x21-\x7e]{1,256}$`) })
)

// MaxTokenCount bounds a reported token count; a larger one is malformed.
const MaxTokenCount = 1 << 40

// maxAttempts bounds a recorded response's attempts.
const maxAttempts = 1 << 20

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)
}

// short quotes s for an error, at most 64 bytes of it.
func short(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// validateRequest checks the provider-neutral shape of req.
func validateRequest(req *Request) error {
	if len(req.Messages) == 0 {
		return malformed("request: no messages")
	}
	if req.MaxTokens < 0 {
		return malformed("request: negative max tokens")
	}
	seenTool := map[string]bool{}
	for i, t := range req.Tools {
		if !toolName().MatchString(t.Name) {
			return malformed("request: tool %d: bad name %s", i, short(t.Name))
		}
		if seenTool[t.Name] {
			return malformed("request: duplicate tool %s", short(t.Name))
		}
		seenTool[t.Name] = true
		if err := checkObject(t.InputSchema); err != nil {
			return malformed("request: tool %s: input schema: %v", short(t.Name), err)
		}
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			return malformed("request: message %d: bad role %s", i, short(m.Role))
		}
		if len(m.Content) == 0 {
			return malformed("request: message %d: no content", i)
		}
		for j, b := range m.Content {
			switch b.Type {
			case "text":
			case "tool_use":
				if m.Role != "assistant" {
					return malformed("request: message %d block %d: tool_use in a %s message", i, j, m.Role)
				}
				if b.ID == "" || !toolName().MatchString(b.Name) {
					return malformed("request: message %d block %d: tool_use needs an id and a valid name", i, j)
				}
				if err := checkObject(b.Input); err != nil {
					return malformed("request: message %d block %d: tool_use input: %v", i, j, err)
				}
			case "tool_result":
				if m.Role != "user" {
					return malformed("request: message %d block %d: tool_result in a %s message", i, j, m.Role)
				}
				if b.ToolUseID == "" {
					return malformed("request: message %d block %d: tool_result without tool_use_id", i, j)
				}
			default:
				return malformed("request: message %d block %d: unknown type %s", i, j, short(b.Type))
			}
		}
	}
	return nil
}

var stopReasons = map[string]bool{
	"end_turn": true, "tool_use": true, "max_tokens": true,
	"stop_sequence": true, "refusal": true,
}

// validateResponse checks the invariants of the package doc.
func validateResponse(r *Response) error {
	if !stopReasons[r.StopReason] {
		return malformed("unknown stop reason %s", short(r.StopReason))
	}
	if r.Usage.InputTokens < 0 || r.Usage.OutputTokens < 0 {
		return malformed("negative token count")
	}
	if r.Usage.InputTokens > MaxTokenCount || r.Usage.OutputTokens > MaxTokenCount {
		return malformed("token count over %d", MaxTokenCount)
	}
	if r.Attempts < 0 || r.Attempts > maxAttempts {
		return malformed("attempts %d outside 0..%d", r.Attempts, maxAttempts)
	}
	if !r.Usage.Reported && (r.Usage.InputTokens != 0 || r.Usage.OutputTokens != 0) {
		return malformed("token counts marked unreported")
	}
	ids := map[string]bool{}
	for i, b := range r.Content {
		switch b.Type {
		case "text":
			if b.ID != "" || b.Name != "" || b.Input != nil || b.ToolUseID != "" || b.IsError {
				return malformed("content %d: text block with tool fields", i)
			}
		case "tool_use":
			if b.ID == "" {
				return malformed("content %d: tool_use without id", i)
			}
			if !toolID().MatchString(b.ID) {
				return malformed("content %d: tool_use id is not 1 to 256 printable ASCII characters", i)
			}
			if b.Name == "" {
				return malformed("content %d: tool_use without name", i)
			}
			if !toolName().MatchString(b.Name) {
				return malformed("content %d: tool_use name %s is not 1 to 64 of a-z A-Z 0-9 _ -", i, short(b.Name))
			}
			if b.Text != "" || b.ToolUseID != "" || b.IsError {
				return malformed("content %d: tool_use with foreign fields", i)
			}
			if ids[b.ID] {
				return malformed("content %d: duplicate tool_use id %s", i, short(b.ID))
			}
			ids[b.ID] = true
			if err := checkObject(b.Input); err != nil {
				return malformed("content %d: tool_use %s input: %v", i, short(b.Name), err)
			}
		default:
			return malformed("content %d: unknown block type %s", i, short(b.Type))
		}
	}
	if (len(ids) > 0) != (r.StopReason == "tool_use") {
		return malformed("stop reason %s with %d tool_use blocks", short(r.StopReason), len(ids))
	}
	return nil
}
