package hubtoken

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Store keeps the newest hub token where the agent reads it at start: the
// kubeconfig itself comes from a read-only Secret volume in a pod.
type Store interface {
	// Load returns the stored token, "" if none.
	Load(ctx context.Context) (string, error)
	// Save stores t unless the store already holds a token of the same
	// identity that expires no earlier (several agent processes, each
	// renewing its own token, share one store).
	Save(ctx context.Context, t Token) error
	String() string
}

// keepStored reports whether stored should stay rather than be replaced by t.
func keepStored(stored string, t Token) bool {
	s, err := Parse(stored)
	return err == nil && s.SameIdentity(t) && !s.Expiry.Before(t.Expiry)
}

// SecretKey is the key of the token in a SecretStore's Secret.
const SecretKey = "token"

// SecretStore keeps the token in a Secret of the member cluster. The
// agent's member RBAC grants get/update on that one name (resourceNames
// cannot limit create, so the manifests pre-create it); with broader rights
// (an admin kubeconfig, as `make up` uses) a missing Secret is created.
type SecretStore struct {
	Client          kubernetes.Interface
	Namespace, Name string
}

func (s *SecretStore) String() string { return "Secret " + s.Namespace + "/" + s.Name }

// Load reads the token; a missing Secret or key is no token.
func (s *SecretStore) Load(ctx context.Context) (string, error) {
	secret, err := s.Client.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(secret.Data[SecretKey]), nil
}

// Save writes t with optimistic concurrency, retrying on conflicts.
func (s *SecretStore) Save(ctx context.Context, t Token) error {
	secrets := s.Client.CoreV1().Secrets(s.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		secret, err := secrets.Get(ctx, s.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace,
					Labels: map[string]string{"app.kubernetes.io/name": "flotilla-agent", "app.kubernetes.io/part-of": "flotilla"}},
				Type: corev1.SecretTypeOpaque, Data: map[string][]byte{SecretKey: []byte(t.Raw)},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("secrets"), s.Name, err) // a sibling made it: read it again
			}
			return err
		}
		if err != nil {
			return err
		}
		if keepStored(string(secret.Data[SecretKey]), t) {
			return nil
		}
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[SecretKey] = []byte(t.Raw)
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
		return err
	})
}

// FileStore keeps the token in a file, for an agent run as a process (the
// directory must be writable: the file is replaced by a rename, so a reader
// never sees half a token).
type FileStore struct{ Path string }

func (s *FileStore) String() string { return "file " + s.Path }

// Load reads the token; a missing file is no token.
func (s *FileStore) Load(context.Context) (string, error) {
	data, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return string(data), err
}

// Save writes t (mode 0600) unless the file holds a token expiring no
// earlier.
func (s *FileStore) Save(ctx context.Context, t Token) error {
	stored, err := s.Load(ctx)
	if err != nil {
		return err
	}
	if keepStored(stored, t) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.Path), "."+filepath.Base(s.Path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(t.Raw); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return fmt.Errorf("replacing %s: %w", s.Path, err)
	}
	return nil
}
