package model_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model"
)

// fakeChat is an OpenAI-compatible /chat/completions server streaming SSE
// chunks the way OpenAI, Ollama and vLLM do.
func fakeChat(t *testing.T, chunks []string) (*httptest.Server, *[]map[string]any) {
	var mu sync.Mutex
	var got []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		body["_auth"] = r.Header.Get("Authorization")
		body["_header"] = r.Header.Clone()
		mu.Lock()
		got = append(got, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range chunks {
			fmt.Fprintf(w, "data: %s\n\n", c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func TestOpenAIStreamsTextAndToolCalls(t *testing.T) {
	chunk := func(delta string, finish string) string {
		f := "null"
		if finish != "" {
			f = fmt.Sprintf("%q", finish)
		}
		return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama3","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, delta, f)
	}
	srv, got := fakeChat(t, []string{
		chunk(`{"role":"assistant","content":"Let me "}`, ""),
		chunk(`{"content":"check."}`, ""),
		chunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":"{\"comm"}}]}`, ""),
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"ls\"}"}}]}`, ""),
		chunk(`{}`, "tool_calls"),
		`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"llama3","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":9,"total_tokens":39}}`,
	})
	p := model.NewOpenAI(model.OpenAIConfig{APIKey: "sk-o", BaseURL: srv.URL + "/v1"})
	req := &model.Request{
		Model: "llama3", System: "sys", MaxTokens: 100,
		Messages: []model.Message{
			{Role: model.RoleUser, Content: []model.Block{model.Text("hi")}},
			{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: "call_0", Name: "read", Input: json.RawMessage(`{"file_path":"a"}`)}}},
			{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "call_0", Content: []model.Block{model.Text("contents")}}, model.Text("and now?")}},
		},
		Tools: []model.Tool{{Name: "bash", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`)}},
	}
	var blocks []model.Block
	resp, err := p.Stream(context.Background(), req, func(b model.Block) error { blocks = append(blocks, b); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].Text != "Let me check." || blocks[1].ID != "call_1" || blocks[1].Name != "bash" || string(blocks[1].Input) != `{"command":"ls"}` {
		t.Fatalf("blocks %+v", blocks)
	}
	if resp.StopReason != model.StopToolUse || resp.Usage.InputTokens != 30 || resp.Usage.OutputTokens != 9 {
		t.Fatalf("resp %+v", resp)
	}
	body := (*got)[0]
	if body["_auth"] != "Bearer sk-o" || body["stream"] != true || body["model"] != "llama3" {
		t.Fatalf("request %v", body)
	}
	msgs := body["messages"].([]any)
	roles := ""
	for _, m := range msgs {
		roles += m.(map[string]any)["role"].(string) + ","
	}
	if roles != "system,user,assistant,tool,user," {
		t.Fatalf("roles %s in %v", roles, msgs)
	}
	if tool := msgs[3].(map[string]any); tool["tool_call_id"] != "call_0" || tool["content"] != "contents" {
		t.Fatalf("tool message %v", tool)
	}
}

func TestOpenAIEndTurn(t *testing.T) {
	srv, _ := fakeChat(t, []string{
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello"},"finish_reason":"stop"}]}`,
	})
	p := model.NewOpenAI(model.OpenAIConfig{BaseURL: srv.URL + "/v1"})
	resp, err := p.Stream(context.Background(), &model.Request{Model: "m", Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("hi")}}}}, nil)
	if err != nil || resp.StopReason != model.StopEndTurn || resp.Content[0].Text != "hello" {
		t.Fatalf("%+v %v", resp, err)
	}
}
