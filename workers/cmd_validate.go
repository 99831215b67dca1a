package workers

import "context"

func runValidate(ctx context.Context, cx *cmdContext) error { return notYet(cx, 2) }
