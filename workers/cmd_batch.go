package workers

import "context"

func runBatch(ctx context.Context, cx *cmdContext) error { return notYet(cx, 4) }
