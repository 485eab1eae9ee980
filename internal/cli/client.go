package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/agentkernel/agentkernel"
)

// clientFlags are shared by every command that talks to a daemon.
type clientFlags struct {
	url    string
	apiKey string
	home   string
	json   bool
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", "", "daemon URL (default $AGENTKERNEL_URL or http://127.0.0.1:18888)")
	fs.StringVar(&c.apiKey, "api-key", "", "API key (default $AGENTKERNEL_API_KEY, then $AGENTKERNEL_HOME/admin.key)")
	fs.StringVar(&c.home, "home", "", "agentkernel home where admin.key lives (default $AGENTKERNEL_HOME or ~/.local/share/agentkernel)")
	fs.BoolVar(&c.json, "json", false, "print JSON for scripts instead of a table")
}

// client builds an SDK client: flags > environment > $home/admin.key.
func (c *clientFlags) client(m *Main) *agentkernel.Client {
	var opts []agentkernel.Option
	url := c.url
	if url == "" {
		url = m.getenv("AGENTKERNEL_URL")
	}
	if url != "" {
		opts = append(opts, agentkernel.WithBaseURL(url))
	}
	key := c.apiKey
	if key == "" {
		key = m.getenv("AGENTKERNEL_API_KEY")
	}
	if key != "" {
		opts = append(opts, agentkernel.WithAPIKey(key))
	}
	home := c.home
	if home == "" {
		home = m.getenv("AGENTKERNEL_HOME")
	}
	if home != "" {
		opts = append(opts, agentkernel.WithHome(home))
	}
	return agentkernel.New(opts...)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table prints rows aligned for people.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
