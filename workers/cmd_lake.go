package workers

import "context"

func runLake(ctx context.Context, cx *cmdContext) error { return notYet(cx, 4) }
