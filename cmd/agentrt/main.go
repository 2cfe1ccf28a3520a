// Command agentrt serves an agent, written as a WebAssembly plugin, over the
// Agent Protocol v1.
//
//	agentrt run PLUGIN.wasm [--addr HOST:PORT] [--data DIR] [--dev] [flags]
//	agentrt dev PLUGIN.wasm [flags]
//	agentrt serve --plugins DIR [--default NAME] [flags]
//	agentrt check URL [--json] [--only GROUP]
//	agentrt client COMMAND [flags]
//	agentrt keys create|list|revoke|open [flags]
//	agentrt new go|tinygo|rust DIR [--name NAME]
//	agentrt call PLUGIN.wasm task|step|artifact [--input TEXT] [--workspace DIR]
//	agentrt version
//
// This is the only package that wires the others together.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	goruntime "runtime"
	"runtime/debug"
	"syscall"

	"github.com/agentrt/agentrt/plugins/abi"
	"github.com/google/uuid"
)

// version is agentrt's version.
const version = "0.1.0"

// buildVersion is agentrt's version with the commit it was built from, when
// the build recorded one: snapshots cached by one build are not used by
// another (runtime.Config.Version).
func buildVersion() string {
	v := version
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision":
			v += " " + s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			v += "+modified"
		}
	}
	return v
}

const usage = `agentrt serves an agent, written as a WebAssembly plugin, over the Agent Protocol v1.

Usage:
  agentrt run PLUGIN.wasm [flags]   serve the plugin's agent at http://ADDR/ap/v1
  agentrt dev PLUGIN.wasm [flags]   run --dev: requests and the plugin's log in the terminal,
                                    the plugin reloaded whenever it is rebuilt
  agentrt serve --plugins DIR       serve every plugin of DIR, each at http://ADDR/agents/NAME/ap/v1,
                                    picking up plugins added, replaced and removed
  agentrt check URL [flags]         check any Agent Protocol server against the protocol
  agentrt client COMMAND [flags]    talk to any Agent Protocol server: tasks, steps, artifacts
  agentrt keys COMMAND [flags]      create, list and revoke the API keys of a data directory; open it to anyone
  agentrt new go|tinygo|rust DIR    write a plugin project: a handler, its test, a Makefile
  agentrt call PLUGIN.wasm HANDLER  run one handler (task, step, artifact) once in the sandbox, without a server
  agentrt config [flags]            print the server's configuration as run and serve would read it
  agentrt config check FILE         check a server configuration file (--server-config FILE)
  agentrt version                   print the version
  agentrt help                      print this help

Run "agentrt COMMAND --help" for the flags of a command.
`

func main() {
	// Ids come from a pool of crypto/rand bytes, refilled 16 at a time,
	// rather than one getrandom system call each.
	uuid.EnableRandPool()
	tuneRuntime(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal shuts down gracefully; a second one, handled as
	// Go does by default, ends the process at once (the next start marks
	// the steps it stopped interrupted).
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) && !errors.Is(err, errCallFailed) {
			fmt.Fprintf(os.Stderr, "agentrt: %v\n", err)
		}
		stop()
		os.Exit(exitCode(err))
	}
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func exitCode(err error) int {
	var u *usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &u):
		return 2
	}
	return 1
}

// runMain runs the command line args.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return &usageError{"no command given"}
	}
	switch args[0] {
	case "run":
		cfg, err := parseRunFlags(args[1:], stderr)
		if err != nil {
			return err
		}
		return run(ctx, cfg, stderr)
	case "dev":
		cfg, err := parseRunFlags(append([]string{"--dev"}, args[1:]...), stderr)
		if err != nil {
			return err
		}
		return run(ctx, cfg, stderr)
	case "serve":
		cfg, err := parseServeFlags(args[1:], stderr)
		if err != nil {
			return err
		}
		return run(ctx, cfg, stderr)
	case "check":
		return checkCommand(ctx, args[1:], stdout, stderr)
	case "client":
		return clientCommand(ctx, args[1:], stdout, stderr)
	case "keys":
		return keysCommand(ctx, args[1:], stdout, stderr)
	case "new":
		return newCommand(args[1:], stdout, stderr)
	case "call":
		return callCommand(ctx, args[1:], stdout, stderr)
	case "config":
		return configCommand(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintf(stdout, "agentrt %s (plugin ABI %d, %s)\n", version, abi.Version, goruntime.Version())
		return nil
	case "help", "--help", "-help", "-h":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return &usageError{fmt.Sprintf("unknown command %q", args[0])}
}

// parseInterspersed parses args with fs, flags and arguments in any order
// ("run p.wasm --addr X" as "run --addr X p.wasm"), and returns the
// arguments. Everything after "--" is an argument. A mistake is a
// usageError; -help is flag.ErrHelp.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, &usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		if n := len(args) - fs.NArg(); n > 0 && args[n-1] == "--" {
			return append(positional, fs.Args()...), nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
