// Command crd2jsonschema writes strict JSON schemas for kubeconform, offline:
//
//	crd2jsonschema -out DIR [-swagger swagger.json] [crd.yaml ...]
//
// Each file is named the way kubeconform's "{{ .ResourceKind }}{{ .KindSuffix }}.json" schema location
// template expects (deployment-apps-v1.json, service-v1.json, httpproxy-projectcontour-v1.json).
// -swagger takes Kubernetes' api/openapi-spec/swagger.json (in the k8s.io/kubernetes module) for the
// built-in kinds; every other argument is a YAML file of CustomResourceDefinitions. As in kubeconform's own
// openapi2jsonschema: $refs are inlined, int-or-string becomes string|integer, objects with properties
// reject unknown fields, optional fields accept null; OpenAPI 3.0's boolean exclusiveMaximum/Minimum
// become draft-6 numbers (otherwise the schema does not compile and kubeconform reports it missing).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

func main() {
	out := flag.String("out", "", "output folder (created)")
	swagger := flag.String("swagger", "", "Kubernetes swagger.json (optional)")
	flag.Parse()
	if *out == "" {
		fail(errors.New("-out is required"))
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(err)
	}
	n := 0
	if *swagger != "" {
		c, err := fromSwagger(*swagger, *out)
		if err != nil {
			fail(fmt.Errorf("%s: %w", *swagger, err))
		}
		n += c
	}
	for _, f := range flag.Args() {
		c, err := fromCRDs(f, *out)
		if err != nil {
			fail(fmt.Errorf("%s: %w", f, err))
		}
		n += c
	}
	fmt.Fprintf(os.Stderr, "crd2jsonschema: wrote %d schemas to %s\n", n, *out)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "error: crd2jsonschema: %v\n", err)
	os.Exit(1)
}

type object = map[string]any

// fileName follows kubeconform: lower(kind) + "-" + first label of the group (if any) + "-" + version.
func fileName(group, version, kind string) string {
	name := strings.ToLower(kind)
	if group != "" {
		name += "-" + strings.ToLower(strings.Split(group, ".")[0])
	}
	return name + "-" + strings.ToLower(version) + ".json"
}

func write(dir, name string, schema object) error {
	schema["$schema"] = "http://json-schema.org/schema#"
	b, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}

func fromCRDs(path, dir string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	n := 0
	for {
		var doc object
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return n, nil
		} else if err != nil {
			return n, err
		}
		if doc == nil || doc["kind"] != "CustomResourceDefinition" {
			continue
		}
		spec, _ := doc["spec"].(object)
		group, _ := spec["group"].(string)
		names, _ := spec["names"].(object)
		kind, _ := names["kind"].(string)
		versions, _ := spec["versions"].([]any)
		for _, v := range versions {
			ver, _ := v.(object)
			name, _ := ver["name"].(string)
			s, _ := ver["schema"].(object)
			root, ok := s["openAPIV3Schema"].(object)
			if !ok || kind == "" || name == "" {
				return n, fmt.Errorf("CRD %s has a version without name or openAPIV3Schema", kind)
			}
			if err := write(dir, fileName(group, name, kind), strictCRD(root).(object)); err != nil {
				return n, err
			}
			n++
		}
	}
}

// strictCRD rewrites an OpenAPI v3 CRD schema (structural) into a strict JSON schema.
func strictCRD(node any) any {
	switch t := node.(type) {
	case object:
		res := object{}
		for k, v := range t {
			res[k] = strictCRD(v)
		}
		if res["x-kubernetes-int-or-string"] == true {
			delete(res, "type")
			res["oneOf"] = []any{object{"type": "string"}, object{"type": "integer"}}
		}
		// OpenAPI 3.0's boolean exclusiveMaximum/exclusiveMinimum are numbers in JSON schema draft 6+.
		for _, pair := range [][2]string{{"exclusiveMaximum", "maximum"}, {"exclusiveMinimum", "minimum"}} {
			if b, ok := res[pair[0]].(bool); ok {
				delete(res, pair[0])
				if bound, has := res[pair[1]]; b && has {
					res[pair[0]] = bound
					delete(res, pair[1])
				}
			}
		}
		if res["nullable"] == true {
			if typ, ok := res["type"].(string); ok {
				res["type"] = []any{typ, "null"}
			}
		}
		if _, has := res["properties"]; has && res["x-kubernetes-preserve-unknown-fields"] != true {
			if _, set := res["additionalProperties"]; !set {
				res["additionalProperties"] = false
			}
		}
		return res
	case []any:
		res := make([]any, len(t))
		for i, v := range t {
			res[i] = strictCRD(v)
		}
		return res
	default:
		return node
	}
}

func fromSwagger(path, dir string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Definitions map[string]object `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return 0, err
	}
	n := 0
	for name, def := range doc.Definitions {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		if len(gvks) != 1 { // meta kinds (DeleteOptions, WatchEvent) list every group; not resources
			continue
		}
		gvk, _ := gvks[0].(object)
		group, _ := gvk["group"].(string)
		version, _ := gvk["version"].(string)
		kind, _ := gvk["kind"].(string)
		schema := inline(doc.Definitions, object{"$ref": "#/definitions/" + name}, map[string]bool{}, true).(object)
		if err := write(dir, fileName(group, version, kind), schema); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// inline resolves "#/definitions/X" references; a reference already being resolved higher up (a
// recursive type such as JSONSchemaProps) becomes an unconstrained schema.
func inline(defs map[string]object, node any, stack map[string]bool, required bool) any {
	switch t := node.(type) {
	case object:
		if ref, ok := t["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/definitions/")
			if stack[name] {
				return object{}
			}
			stack[name] = true
			defer delete(stack, name)
			res := inline(defs, defs[name], stack, required).(object)
			if d, ok := t["description"]; ok {
				res["description"] = d
			}
			return res
		}
		if t["format"] == "int-or-string" {
			return object{"oneOf": []any{object{"type": "string"}, object{"type": "integer"}, object{"type": "null"}}}
		}
		res := object{}
		req := map[string]bool{}
		if r, ok := t["required"].([]any); ok {
			for _, x := range r {
				if s, ok := x.(string); ok {
					req[s] = true
				}
			}
		}
		for k, v := range t {
			switch k {
			case "properties":
				props := object{}
				for pn, pv := range v.(object) {
					props[pn] = inline(defs, pv, stack, req[pn])
				}
				res[k] = props
			case "x-kubernetes-group-version-kind":
				// drop: not JSON schema
			default:
				res[k] = inline(defs, v, stack, true)
			}
		}
		if typ, ok := res["type"].(string); ok && !required {
			res["type"] = []any{typ, "null"}
		}
		if _, has := res["properties"]; has {
			if _, set := res["additionalProperties"]; !set {
				res["additionalProperties"] = false
			}
		}
		return res
	case []any:
		res := make([]any, len(t))
		for i, v := range t {
			res[i] = inline(defs, v, stack, true)
		}
		return res
	default:
		return node
	}
}
