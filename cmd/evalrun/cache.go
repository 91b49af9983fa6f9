package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/pipeline/refcache"
)

func newCacheCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "cache stats|prune [--dir DIR]",
		Short: "The reference-logits cache (spec cache: or EVALRUN_CACHE): its size, and pruning by age or size",
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", os.Getenv("EVALRUN_CACHE"), "the cache directory (default $EVALRUN_CACHE)")
	cmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		if dir == "" {
			return usageErr("cache: --dir DIR or EVALRUN_CACHE is required")
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return usageErr("cache: %s is not a directory", dir)
		}
		return nil
	}
	stats := &cobra.Command{
		Use: "stats", Short: "Entries, bytes, least and most recently used", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			entries, err := refcache.List(dir)
			if err != nil {
				return backendErr(err)
			}
			var total int64
			for _, e := range entries {
				total += e.Size
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "%s: %d entries, %d bytes\n", dir, len(entries), total)
			if len(entries) > 0 {
				fmt.Fprintf(w, "least recently used %s, most recently used %s\n",
					entries[0].ModTime.UTC().Format(time.RFC3339), entries[len(entries)-1].ModTime.UTC().Format(time.RFC3339))
			}
			return nil
		},
	}
	var maxAge time.Duration
	var maxBytes int64
	prune := &cobra.Command{
		Use: "prune --max-age 720h | --max-bytes N", Short: "Remove entries unused for longer than --max-age, then the least recently used beyond --max-bytes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case cmd.Flags().Changed("max-age") && maxAge <= 0:
				return usageErr("cache prune: --max-age %v: must be positive (entries unused for longer are removed)", maxAge)
			case cmd.Flags().Changed("max-bytes") && maxBytes <= 0:
				return usageErr("cache prune: --max-bytes %d: must be positive (the size the cache is pruned to); to empty the cache, remove %s", maxBytes, dir)
			case maxAge <= 0 && maxBytes <= 0:
				return usageErr("cache prune: give --max-age or --max-bytes")
			}
			removed, err := refcache.Prune(dir, maxAge, maxBytes, time.Now())
			var freed int64
			for _, e := range removed {
				freed += e.Size
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: removed %d entries, %d bytes\n", dir, len(removed), freed)
			if err != nil {
				return backendErr(err)
			}
			return nil
		},
	}
	prune.Flags().DurationVar(&maxAge, "max-age", 0, "remove entries not used for this long (e.g. 720h)")
	prune.Flags().Int64Var(&maxBytes, "max-bytes", 0, "then remove the least recently used until the cache is at most this size")
	cmd.AddCommand(stats, prune)
	return cmd
}
