package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// gatedServer is a webhook server that starts serving only once its
// certificate is ready. Serving earlier would hand the apiserver a
// certificate that it cannot verify yet, or none at all.
type gatedServer struct {
	webhook.Server
	// certReady blocks until the certificate is ready or ctx is done.
	certReady func(ctx context.Context) error
	// waitingFor says, in /readyz, what the server waits for.
	waitingFor string
	serving    atomic.Bool
}

// Start waits for the certificate, then serves until ctx is done.
func (s *gatedServer) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("webhook")
	log.Info("Waiting for the serving certificate before serving webhooks", "for", s.waitingFor)
	if err := s.certReady(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it was ready
		}
		return err
	}
	log.Info("The serving certificate is ready")
	s.serving.Store(true)
	return s.Server.Start(ctx)
}

// StartedChecker fails until the certificate is ready and the server
// answers TLS on its port.
func (s *gatedServer) StartedChecker() healthz.Checker {
	started := s.Server.StartedChecker()
	return func(req *http.Request) error {
		if !s.serving.Load() {
			return fmt.Errorf("waiting for %s", s.waitingFor)
		}
		return started(req)
	}
}

// channelClosed waits until ch is closed.
func channelClosed(ch <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// certFilesPoll is how often the server looks for certificate files that
// someone else writes.
const certFilesPoll = time.Second

// certFilesExist waits until dir holds tls.crt and tls.key.
func certFilesExist(dir string) func(context.Context) error {
	return func(ctx context.Context) error {
		return wait.PollUntilContextCancel(ctx, certFilesPoll, true, func(context.Context) (bool, error) {
			for _, name := range []string{"tls.crt", "tls.key"} {
				_, err := os.Stat(filepath.Join(dir, name))
				if errors.Is(err, os.ErrNotExist) {
					return false, nil
				}
				if err != nil {
					return false, err
				}
			}
			return true, nil
		})
	}
}
