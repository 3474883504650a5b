package wrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Input is one file's content; Name is used in messages.
type Input struct {
	Name string
	Data []byte
}

// Stdin is the file name that reads standard input, as in kubectl.
const Stdin = "-"

// manifestExtensions are the file types read from a directory (kubectl's
// list); a file named explicitly is read whatever its name.
var manifestExtensions = []string{".yaml", ".yml", ".json"}

// ReadInputs reads the files named by paths: a file, a directory (its
// .yaml, .yml and .json files in lexical order, and those of
// subdirectories when recursive) or Stdin.
func ReadInputs(paths []string, recursive bool, stdin io.Reader) ([]Input, error) {
	var inputs []Input
	for _, p := range paths {
		if p == Stdin {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return nil, fmt.Errorf("reading standard input: %w", err)
			}
			inputs = append(inputs, Input{Name: "<stdin>", Data: data})
			continue
		}
		info, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !info.IsDir() {
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, Input{Name: p, Data: data})
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && !recursive {
					return filepath.SkipDir
				}
				return nil
			}
			if !hasManifestExtension(path) {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			inputs = append(inputs, Input{Name: path, Data: data})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return inputs, nil
}

func hasManifestExtension(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	for _, e := range manifestExtensions {
		if ext == e {
			return true
		}
	}
	return false
}

// sourced is one object read from the input, with where it came from.
type sourced struct {
	obj *unstructured.Unstructured
	src string // "file, document N" (and ", item M" for List items)
}

// decodeInput splits one file into objects: a YAML stream of documents or
// a stream of JSON objects; List kinds are flattened into their items.
// Documents are numbered from 1 as the decoder yields them: a document
// with nothing between two --- separators is not one (the YAML reader
// drops it), one holding only comments is, and is skipped.
func decodeInput(in Input) ([]sourced, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(in.Data), 4096)
	var out []sourced
	for doc := 1; ; doc++ {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		src := fmt.Sprintf("%s, document %d", in.Name, doc)
		if err != nil {
			return nil, fmt.Errorf("%s: not valid YAML or JSON: %w", src, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		// util/json keeps whole numbers as int64 (encoding/json would make
		// them float64), so replicas: 3 stays 3 in the output.
		var content any
		if err := utiljson.Unmarshal(raw, &content); err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		m, ok := content.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: not a Kubernetes object (a %s, not a mapping)", src, jsonKind(content))
		}
		objs, err := flatten(m, src)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
}

// flatten returns the object, or the items of a List (any kind ending in
// List with an items array, as kubectl treats them), checking each has what
// a template needs.
func flatten(m map[string]any, src string) ([]sourced, error) {
	obj := &unstructured.Unstructured{Object: m}
	if items, isList := m["items"].([]any); isList && strings.HasSuffix(obj.GetKind(), "List") {
		var out []sourced
		for i, item := range items {
			itemSrc := fmt.Sprintf("%s, item %d", src, i+1)
			im, ok := item.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: not a Kubernetes object (a %s, not a mapping)", itemSrc, jsonKind(item))
			}
			// Lists nest (a List of Lists is legal, if rare).
			objs, err := flatten(im, itemSrc)
			if err != nil {
				return nil, err
			}
			out = append(out, objs...)
		}
		return out, nil
	}
	if err := checkObject(obj); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return []sourced{{obj: obj, src: src}}, nil
}

// checkObject rejects what cannot become a template: the apiserver would
// refuse it anyway, later and with less context.
func checkObject(obj *unstructured.Unstructured) error {
	var missing []string
	if obj.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if obj.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if _, ok := obj.Object["metadata"].(map[string]any); !ok && obj.Object["metadata"] != nil {
		return fmt.Errorf("metadata is not a mapping")
	}
	if obj.GetName() == "" {
		if obj.GetGenerateName() != "" {
			missing = append(missing, "metadata.name (metadata.generateName is not enough: a template needs a fixed name)")
		} else {
			missing = append(missing, "metadata.name")
		}
	}
	if len(missing) > 0 {
		desc := "object"
		if k := obj.GetKind(); k != "" {
			desc = k
		}
		return fmt.Errorf("%s has no %s", desc, strings.Join(missing, ", "))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	case nil:
		return "null"
	default:
		return "number"
	}
}
