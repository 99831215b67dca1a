package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"reckon/lake/storage"
)

// LakeErrors is a worker interceptor that classifies lake storage failures
// in one place for every activity: an activity that fails because the
// lake's storage refuses access for good (storage.IsPermanent: access denied,
// the bucket gone) fails with a non-retryable application error of type
// ErrTypeLakeAccess whose message names the cause, so the workflow and the
// UI show it at once instead of after hours of retries. Transient storage
// failures (5xx, timeouts, short reads, a full disk) stay retryable, and an
// error that already is an application error keeps its type.
type LakeErrors struct {
	interceptor.WorkerInterceptorBase
}

// InterceptActivity implements interceptor.WorkerInterceptor.
func (*LakeErrors) InterceptActivity(_ context.Context,
	next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return MapActivityErrors(next, func(_ context.Context, err error) error { return LakeError(err) })
}

// MapActivityErrors returns an activity inbound interceptor that runs the
// activity with next and passes its error (nil on success) through mapErr,
// with the activity's context: the shape of a worker interceptor that
// classifies activity errors in one place (LakeErrors; the batch worker's
// quiet stop in package workers).
func MapActivityErrors(next interceptor.ActivityInboundInterceptor,
	mapErr func(ctx context.Context, err error) error) interceptor.ActivityInboundInterceptor {
	return &mapErrorsActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next},
		mapErr: mapErr}
}

type mapErrorsActivity struct {
	interceptor.ActivityInboundInterceptorBase
	mapErr func(context.Context, error) error
}

// ExecuteActivity implements interceptor.ActivityInboundInterceptor.
func (a *mapErrorsActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	out, err := a.Next.ExecuteActivity(ctx, in)
	return out, a.mapErr(ctx, err)
}

// LakeError returns err as a non-retryable ErrTypeLakeAccess application
// error when storage.IsPermanent(err), else err unchanged.
func LakeError(err error) error {
	if err == nil || !storage.IsPermanent(err) {
		return err
	}
	if _, ok := errors.AsType[*temporal.ApplicationError](err); ok {
		return err
	}
	return temporal.NewNonRetryableApplicationError("lake storage refuses access (not retried): "+err.Error(),
		ErrTypeLakeAccess, err)
}
