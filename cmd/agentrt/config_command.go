package main

import (
	"fmt"
	"io"
)

const configUsage = `Usage: agentrt config [--server-config FILE] [flags]
       agentrt config check FILE

Prints the server's configuration as "agentrt run" and "agentrt serve"
would read it from FILE and the flags given (the flags win over the
file), as a JSON document --server-config takes: every field, the
defaults included. A secret is shown by its name, where it comes from,
its agents and destinations, never by its value. "config check FILE"
reads FILE as a server would and says what is wrong, naming the field.
docs/CONFIG.md lists every field.

Flags:
`

// configCommand runs "agentrt config".
func configCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "check" {
		if len(args) != 2 {
			fmt.Fprint(stderr, configUsage)
			return &usageError{"config check needs one FILE"}
		}
		if _, err := parseFlags("config", []string{"--server-config", args[1]}, stderr); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "%s: a server configuration agentrt reads\n", args[1])
		return err
	}
	cfg, err := parseFlags("config", args, stderr)
	if err != nil {
		return err
	}
	b, err := cfg.doc.shown()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", b)
	return err
}
