// composecheck loads a compose file with compose-go (the library behind `docker compose config`):
// schema validation, interpolation and cross-references (depends_on, ...). It prints the
// normalised project as JSON, or the error and exits 1. No Docker engine is needed.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: composecheck docker-compose.yml")
		os.Exit(2)
	}
	path, _ := filepath.Abs(os.Args[1])
	options, err := cli.NewProjectOptions([]string{path}, cli.WithWorkingDirectory(filepath.Dir(path)), cli.WithName("otel-liveness"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out, err := json.MarshalIndent(project, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}
