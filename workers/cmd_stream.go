package workers

import (
	"context"
	"log/slog"

	"reckon/internal/metrics"
	"reckon/streaming"
)

func runStream(ctx context.Context, cx *cmdContext) error {
	if err := cx.parse(); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(cx.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := metrics.NewRegistry()
	go func() {
		err := metrics.Serve(ctx, cx.cfg.Metrics.Addr, reg, func(addr string) {
			log.Info("metrics", "url", "http://"+addr+"/metrics")
		})
		if err != nil {
			log.Warn("metrics endpoint off", "err", err)
		}
	}()
	w, err := streaming.New(cx.cfg, log, reg)
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
