package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
)

type openAI struct {
	c     *client
	model string
}

// NewOpenAI returns a client of the OpenAI-compatible Chat Completions API
// (OpenAI, vLLM, Ollama, llama.cpp); see the package doc for the wire format
// and cfg's defaults. A nil cfg.Key sends no Authorization header.
func NewOpenAI(cfg Config) (Provider, error) {
	c, err := newClient("openai", cfg, "https://api.openai.com/v1", "/chat/completions", false)
	if err != nil {
		return nil, err
	}
	c.idHeader = "x-request-id"
	c.errorText = jsonErrorText
	c.setHeaders = func(h http.Header, key string) {
		if key != "" {
			h.Set("Authorization", "Bearer "+key)
		}
	}
	return &openAI{c: c, model: cfg.Model}, nil
}

func (o *openAI) Name() string { return "openai" }

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type openAITool struct {
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

type openAICall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openAIPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type openAIMessage struct {
	Role       string       `json:"role"`
	Content    any          `json:"content"` // string, []openAIPart or nil
	ToolCalls  []openAICall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
}

type openAIRequest struct {
	Model     string          `json:"model"`
	Messages  []openAIMessage `json:"messages"`
	Tools     []openAITool    `json:"tools,omitempty"`
	MaxTokens int             `json:"max_tokens,omitempty"`
}

func textContent(texts []string) any {
	switch len(texts) {
	case 0:
		return nil
	case 1:
		return texts[0]
	}
	parts := make([]openAIPart, len(texts))
	for i, t := range texts {
		parts[i] = openAIPart{Type: "text", Text: t}
	}
	return parts
}

// encodeOpenAI returns the Chat Completions body for req. A user message's
// tool results become role "tool" messages, in order, before a user message
// carrying its text blocks, if any.
func encodeOpenAI(req Request, defaultModel string) ([]byte, error) {
	if err := validateRequest(&req); err != nil {
		return nil, err
	}
	out := openAIRequest{Model: req.Model, MaxTokens: req.MaxTokens}
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
		out.Tools = append(out.Tools, openAITool{Type: "function", Function: openAIFunction{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	if req.System != "" {
		out.Messages = append(out.Messages, openAIMessage{Role: "system", Content: req.System})
	}
	for _, m := range req.Messages {
		var texts []string
		var calls []openAICall
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				var args bytes.Buffer
				if err := json.Compact(&args, b.Input); err != nil {
					return nil, malformed("request: tool_use input: %v", err)
				}
				c := openAICall{ID: b.ID, Type: "function"}
				c.Function.Name, c.Function.Arguments = b.Name, args.String()
				calls = append(calls, c)
			case "tool_result":
				text := b.Text
				if b.IsError {
					text = "error: " + text
				}
				out.Messages = append(out.Messages, openAIMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: text})
			}
		}
		if m.Role == "assistant" {
			out.Messages = append(out.Messages, openAIMessage{Role: "assistant", Content: textContent(texts), ToolCalls: calls})
		} else if len(texts) > 0 {
			out.Messages = append(out.Messages, openAIMessage{Role: "user", Content: textContent(texts)})
		}
	}
	return json.Marshal(out)
}

var finishReasons = map[string]string{
	"stop":           "end_turn",
	"tool_calls":     "tool_use",
	"length":         "max_tokens",
	"content_filter": "refusal",
}

// parseOpenAI parses a 200 body of Chat Completions strictly.
func parseOpenAI(body []byte) (*Response, error) {
	if err := checkObject(body); err != nil {
		return nil, malformed("body: %v", err)
	}
	var r struct {
		Object  *string `json:"object"`
		Model   string  `json:"model"`
		Choices []struct {
			Message *struct {
				Role      string            `json:"role"`
				Content   *string           `json:"content"`
				Refusal   *string           `json:"refusal"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     *int64 `json:"prompt_tokens"`
			CompletionTokens *int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, malformed("body: %v", err)
	}
	if r.Object != nil && *r.Object != "chat.completion" {
		return nil, malformed("object %s, want chat.completion", short(*r.Object))
	}
	if len(r.Choices) != 1 {
		return nil, malformed("%d choices, want 1", len(r.Choices))
	}
	ch := r.Choices[0]
	if ch.Message == nil || ch.Message.Role != "assistant" {
		return nil, malformed("choice has no assistant message")
	}
	if ch.FinishReason == nil {
		return nil, malformed("no finish_reason")
	}
	resp := &Response{Model: r.Model, Content: []Block{}}
	if r.Usage != nil {
		if r.Usage.PromptTokens == nil || r.Usage.CompletionTokens == nil {
			return nil, malformed("usage without prompt_tokens or completion_tokens")
		}
		resp.Usage = Usage{InputTokens: *r.Usage.PromptTokens, OutputTokens: *r.Usage.CompletionTokens, Reported: true}
	}
	msg := ch.Message
	if msg.Content != nil && *msg.Content != "" {
		resp.Content = append(resp.Content, Block{Type: "text", Text: *msg.Content})
	}
	refused := msg.Refusal != nil && *msg.Refusal != ""
	if refused {
		resp.Content = append(resp.Content, Block{Type: "text", Text: *msg.Refusal})
	}
	for i, raw := range msg.ToolCalls {
		var c struct {
			ID       *string `json:"id"`
			Type     *string `json:"type"`
			Function *struct {
				Name      *string `json:"name"`
				Arguments *string `json:"arguments"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, malformed("tool_calls %d: %v", i, err)
		}
		if c.Type != nil && *c.Type != "function" {
			return nil, malformed("tool_calls %d: type %s, want function", i, short(*c.Type))
		}
		if c.ID == nil || c.Function == nil || c.Function.Name == nil || c.Function.Arguments == nil {
			return nil, malformed("tool_calls %d: needs id, function.name and function.arguments", i)
		}
		args := []byte(*c.Function.Arguments)
		if err := checkObject(args); err != nil {
			return nil, malformed("tool_calls %d: arguments: %v", i, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, args); err != nil {
			return nil, malformed("tool_calls %d: arguments: %v", i, err)
		}
		resp.Content = append(resp.Content, Block{Type: "tool_use", ID: *c.ID, Name: *c.Function.Name, Input: compact.Bytes()})
	}
	stop, ok := finishReasons[*ch.FinishReason]
	if !ok {
		return nil, malformed("unknown finish_reason %s", short(*ch.FinishReason))
	}
	// Some compatible servers (older Ollama) report "stop" with tool calls.
	if stop == "end_turn" && len(msg.ToolCalls) > 0 {
		stop = "tool_use"
	}
	if refused {
		stop = "refusal"
	}
	resp.StopReason = stop
	if err := validateResponse(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (o *openAI) Complete(ctx context.Context, req Request) (*Response, error) {
	return o.c.complete(ctx, req, o.model, encodeOpenAI, parseOpenAI)
}
