module gateway-sizer.local/crd2jsonschema

go 1.24.0

require gopkg.in/yaml.v3 v3.0.1
