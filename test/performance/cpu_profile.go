package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// saveCPUProfile records the CPU profile of the operator in over d (served
// by --pprof-bind-address) into path, in the background: where a rollout's
// passes spend the operator's CPU, for `go tool pprof -top path`. The channel
// carries the outcome once the profile is written.
func saveCPUProfile(ctx context.Context, in *instance, d time.Duration, path string, say func(string, ...any)) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			if in.pprofPort == 0 {
				return fmt.Errorf("the operator %s serves no pprof", in.Name)
			}
			seconds := max(1, int(d.Round(time.Second)/time.Second))
			url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", in.pprofPort, seconds)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("CPU profile of %s: %w", in.Name, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("CPU profile of %s: HTTP %d", in.Name, resp.StatusCode)
			}
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, resp.Body); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			say("CPU profile of %s over %ds: %s", in.Name, seconds, path)
			return nil
		}()
	}()
	return done
}
