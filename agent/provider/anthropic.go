package provider

import (
	"context"
	"encoding/json"
	"net/http"
)

type anthropic struct {
	c     *client
	model string
}

// NewAnthropic returns a client of the Anthropic Messages API; see the
// package doc for the wire format and cfg's defaults. cfg.Key is required.
func NewAnthropic(cfg Config) (Provider, error) {
	c, err := newClient("anthropic", cfg, "https://api.anthropic.com", "/v1/messages", true)
	if err != nil {
		return nil, err
	}
	c.idHeader = "request-id"
	c.errorText = jsonErrorText
	c.setHeaders = func(h http.Header, key string) {
		h.Set("x-api-key", key)
		h.Set("anthropic-version", "2023-06-01")
	}
	return &anthropic{c: c, model: cfg.Model}, nil
}

func (a *anthropic) Name() string { return "anthropic" }

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicBlockOut struct {
	Type      string           `json:"type"`
	Text      *string          `json:"text,omitempty"`
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Input     *json.RawMessage `json:"input,omitempty"`
	ToolUseID string           `json:"tool_use_id,omitempty"`
	Content   *string          `json:"content,omitempty"`
	IsError   bool             `json:"is_error,omitempty"`
}

type anthropicMessage struct {
	Role    string              `json:"role"`
	Content []anthropicBlockOut `json:"content"`
}

type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    string             `json:"system,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools,omitempty"`
}

// encodeAnthropic returns the Messages API body for req.
func encodeAnthropic(req Request, defaultModel string) ([]byte, error) {
	if err := validateRequest(&req); err != nil {
		return nil, err
	}
	out := anthropicRequest{Model: req.Model, MaxTokens: req.MaxTokens, System: req.System}
	if out.Model == "" {
		out.Model = defaultModel
	}
	if out.Model == "" {
		return nil, malformed("request: no model")
	}
	if out.MaxTokens == 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, anthropicTool(t))
	}
	for _, m := range req.Messages {
		am := anthropicMessage{Role: m.Role}
		for _, b := range m.Content {
			ob := anthropicBlockOut{Type: b.Type}
			switch b.Type {
			case "text":
				ob.Text = &b.Text
			case "tool_use":
				in := b.Input
				ob.ID, ob.Name, ob.Input = b.ID, b.Name, &in
			case "tool_result":
				ob.ToolUseID, ob.Content, ob.IsError = b.ToolUseID, &b.Text, b.IsError
			}
			am.Content = append(am.Content, ob)
		}
		out.Messages = append(out.Messages, am)
	}
	return json.Marshal(out)
}

// parseAnthropic parses a 200 body of the Messages API strictly.
func parseAnthropic(body []byte) (*Response, error) {
	if err := checkObject(body); err != nil {
		return nil, malformed("body: %v", err)
	}
	var r struct {
		Type       string            `json:"type"`
		Role       string            `json:"role"`
		Model      string            `json:"model"`
		Content    []json.RawMessage `json:"content"`
		StopReason *string           `json:"stop_reason"`
		Usage      *struct {
			InputTokens  *int64 `json:"input_tokens"`
			OutputTokens *int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed("body: %v", err)
	}
	if r.Type != "message" || r.Role != "assistant" {
		return nil, malformed("type %s role %s, want message from assistant", short(r.Type), short(r.Role))
	}
	if r.Content == nil {
		return nil, malformed("no content")
	}
	if r.StopReason == nil {
		return nil, malformed("no stop_reason")
	}
	if r.Usage == nil || r.Usage.InputTokens == nil || r.Usage.OutputTokens == nil {
		return nil, malformed("no usage")
	}
	resp := &Response{
		StopReason: *r.StopReason,
		Model:      r.Model,
		Usage:      Usage{InputTokens: *r.Usage.InputTokens, OutputTokens: *r.Usage.OutputTokens, Reported: true},
		Content:    []Block{},
	}
	for i, raw := range r.Content {
		var b struct {
			Type  string          `json:"type"`
			Text  *string         `json:"text"`
			ID    *string         `json:"id"`
			Name  *string         `json:"name"`
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, malformed("content %d: %v", i, err)
		}
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, malformed("content %d: text block without text", i)
			}
			resp.Content = append(resp.Content, Block{Type: "text", Text: *b.Text})
		case "tool_use":
			if b.ID == nil || b.Name == nil || b.Input == nil {
				return nil, malformed("content %d: tool_use needs id, name and input", i)
			}
			resp.Content = append(resp.Content, Block{Type: "tool_use", ID: *b.ID, Name: *b.Name, Input: b.Input})
		default:
			return nil, malformed("content %d: unknown block type %s", i, short(b.Type))
		}
	}
	if err := validateResponse(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (a *anthropic) Complete(ctx context.Context, req Request) (*Response, error) {
	return a.c.complete(ctx, req, a.model, encodeAnthropic, parseAnthropic)
}
