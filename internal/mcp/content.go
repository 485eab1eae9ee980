package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Blocks turns a tool result into the content blocks of an
// agent.mcp_tool_result event (anthropic-sdk-go's
// BetaManagedAgentsAgentMCPToolResultEventContentUnion): text and base64
// images as they are; what the event cannot carry (audio, binary
// resources, links) as a text line saying what it was. A result with only
// structured content gets it as JSON text, as the MCP spec asks servers to
// do themselves.
func Blocks(res *sdk.CallToolResult) []map[string]any {
	out := make([]map[string]any, 0, len(res.Content))
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			out = append(out, text(c.Text))
		case *sdk.ImageContent:
			out = append(out, map[string]any{"type": "image", "source": map[string]any{
				"type": "base64", "media_type": c.MIMEType, "data": base64.StdEncoding.EncodeToString(c.Data)}})
		case *sdk.AudioContent:
			out = append(out, text(fmt.Sprintf("[audio content (%s, %d bytes) omitted]", c.MIMEType, len(c.Data))))
		case *sdk.ResourceLink:
			out = append(out, text(strings.TrimSpace(fmt.Sprintf("[resource link] %s %s %s", c.Name, c.URI, c.Description))))
		case *sdk.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				out = append(out, text(r.Text))
			default:
				out = append(out, text(fmt.Sprintf("[resource %s (%s, %d bytes) omitted]", r.URI, r.MIMEType, len(r.Blob))))
			}
		default:
			raw, _ := json.Marshal(c)
			out = append(out, text(string(raw)))
		}
	}
	if len(out) == 0 && res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		if err == nil {
			out = append(out, text(string(raw)))
		}
	}
	return out
}

// TextResult is a result holding one text block.
func TextResult(s string, isError bool) *Result {
	return &Result{Content: []map[string]any{text(s)}, IsError: isError}
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }
