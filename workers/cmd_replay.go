package workers

import "context"

func runReplay(ctx context.Context, cx *cmdContext) error { return notYet(cx, 5) }
