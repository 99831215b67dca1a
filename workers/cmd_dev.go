package workers

import "context"

func runDev(ctx context.Context, cx *cmdContext) error { return notYet(cx, 2) }
