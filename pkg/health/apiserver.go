package health

import (
	"context"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
)

// GetAPIServerHealth asks the apiserver behind client for /readyz, falling
// back to /healthz when /readyz is not served (404). It returns the status
// code and body of the answer; err is set only when no answer came (a
// transport error): an HTTP error status is an answer, for the caller to judge.
func GetAPIServerHealth(ctx context.Context, client rest.Interface) (code int, body string, err error) {
	code, body, err = get(ctx, client, "/readyz")
	if err == nil && code == http.StatusNotFound {
		code, body, err = get(ctx, client, "/healthz")
	}
	return code, body, err
}

func get(ctx context.Context, client rest.Interface, path string) (int, string, error) {
	var code int
	body, err := client.Get().AbsPath(path).Do(ctx).StatusCode(&code).Raw()
	if err != nil && code == 0 {
		return 0, "", err
	}
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) && len(body) == 0 {
			body = []byte(status.Status().Message)
		}
	}
	return code, string(body), nil
}
