package workers

import "context"

func runZReport(ctx context.Context, cx *cmdContext) error { return notYet(cx, 6) }
