package workers

import "context"

func runStream(ctx context.Context, cx *cmdContext) error { return notYet(cx, 3) }
