/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Command podimage is the one program in the node tier's two images, built
// by the tier at start (there is no registry to pull from):
//
//	podimage pause   the pod sandbox's process: reaps children, exits on SIGTERM
//	podimage serve   a workload: answers every HTTP path on :8080 with 200
//	                 (its readiness probe), exits on SIGTERM
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: podimage pause|serve")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
		pause()
	case "serve":
		serve()
	default:
		fmt.Fprintf(os.Stderr, "podimage: unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

// pause is PID 1 of the sandbox: it holds the pod's namespaces and reaps
// whatever is reparented to it.
func pause() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

func serve() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	revision := os.Getenv("REVISION")
	srv := &http.Server{
		Addr: ":8080",
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "ok %s\n", revision)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintf(os.Stderr, "podimage: %v\n", err)
		os.Exit(1)
	}
}
