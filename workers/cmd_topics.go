package workers

import "context"

func runTopics(ctx context.Context, cx *cmdContext) error { return notYet(cx, 2) }
