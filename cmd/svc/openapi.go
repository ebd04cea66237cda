package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"svc/api"
)

// openapiCommand prints the platform API's OpenAPI document, the one every API serves at
// /api/openapi.json; -o writes it to a file (the repository keeps it as docs/openapi.json).
func openapiCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "openapi",
		Short: "Print the platform API's OpenAPI 3.1 document (-o FILE writes it to a file)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := api.DocumentJSON()
			if err != nil {
				return err
			}
			if out == "" {
				_, err = cmd.OutOrStdout().Write(doc)
				return err
			}
			if err := os.WriteFile(out, doc, 0o644); err != nil {
				return fmt.Errorf("write the OpenAPI document: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "file to write instead of standard output")
	return cmd
}
