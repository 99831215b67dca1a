package workers

import "context"

func runGenerate(ctx context.Context, cx *cmdContext) error { return notYet(cx, 2) }
