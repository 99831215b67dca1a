package workers

import "context"

func runSimulate(ctx context.Context, cx *cmdContext) error { return notYet(cx, 3) }
