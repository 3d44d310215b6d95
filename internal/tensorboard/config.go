package tensorboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"

	"github.com/cde-rl/cde/internal/tensorboard/eventpb"
)

// Tags and plugin names of the config event (TensorBoard's own: the
// HParams plugin reads a run's hyperparameters from the first tag, the
// text plugin shows the second).
const (
	HParamsTag    = "_hparams_/session_start_info"
	HParamsPlugin = "hparams"
	ConfigTag     = "config"
	TextPlugin    = "text"
)

// Config writes the run's configuration (a YAML key tree, as the run's
// config.yaml holds it) as hyperparameters and as text, in one event at
// the step Open started from. A file that holds them already (a resumed
// run) is left as it is.
func (w *Writer) Config(at time.Time, cfg map[string]any) error {
	if w.has {
		return nil
	}
	hp := map[string]*eventpb.HParamValue{}
	Flatten(cfg, func(key string, v any) { hp[key] = hparamValue(v) })
	start, err := proto.MarshalOptions{Deterministic: true}.Marshal(&eventpb.HParamsPluginData{
		Data: &eventpb.HParamsPluginData_SessionStartInfo{SessionStartInfo: &eventpb.SessionStartInfo{
			Hparams: hp, StartTimeSecs: wallTime(at)}}})
	if err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	text, err := yaml.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("tensorboard: config: %w", err)
	}
	textMeta, err := proto.Marshal(&eventpb.TextPluginData{})
	if err != nil {
		return fmt.Errorf("tensorboard: %w", err)
	}
	s := &eventpb.Summary{Value: []*eventpb.Summary_Value{
		{Tag: HParamsTag, Metadata: pluginMeta(HParamsPlugin, start),
			Value: &eventpb.Summary_Value_Tensor{Tensor: &eventpb.TensorProto{Dtype: eventpb.DataType_DT_FLOAT,
				TensorShape: &eventpb.TensorShapeProto{}, FloatVal: []float32{0}}}},
		{Tag: ConfigTag, Metadata: pluginMeta(TextPlugin, textMeta),
			Value: &eventpb.Summary_Value_Tensor{Tensor: &eventpb.TensorProto{Dtype: eventpb.DataType_DT_STRING,
				TensorShape: &eventpb.TensorShapeProto{}, StringVal: [][]byte{[]byte(markdownCode(string(text)))}}}},
	}}
	var buf bytes.Buffer
	if err := appendEvent(&buf, &eventpb.Event{WallTime: wallTime(at), Step: int64(w.start), What: &eventpb.Event_Summary{Summary: s}}); err != nil {
		return err
	}
	if _, err := w.f.Write(buf.Bytes()); err != nil {
		return err
	}
	w.has = true
	return nil
}

func pluginMeta(plugin string, content []byte) *eventpb.SummaryMetadata {
	return &eventpb.SummaryMetadata{PluginData: &eventpb.SummaryMetadata_PluginData{PluginName: plugin, Content: content},
		DataClass: eventpb.DataClass_DATA_CLASS_TENSOR}
}

// markdownCode indents every line by four spaces: a Markdown code block,
// so the text plugin shows the YAML as written.
func markdownCode(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

// Flatten calls f for every leaf of a YAML key tree in sorted key order,
// with its dotted key ("algorithm.name"); a list or an empty map is a
// leaf.
func Flatten(tree map[string]any, f func(key string, v any)) {
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := m[k]
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(prefix+k+".", sub)
				continue
			}
			f(prefix+k, v)
		}
	}
	walk("", tree)
}

// hparamValue is a config leaf as a hyperparameter: numbers as numbers,
// booleans as booleans, strings as strings; anything else (a list, an
// empty map, null) as its JSON text.
func hparamValue(v any) *eventpb.HParamValue {
	switch x := v.(type) {
	case bool:
		return &eventpb.HParamValue{Kind: &eventpb.HParamValue_BoolValue{BoolValue: x}}
	case string:
		return &eventpb.HParamValue{Kind: &eventpb.HParamValue_StringValue{StringValue: x}}
	case int:
		return number(float64(x))
	case int64:
		return number(float64(x))
	case uint64:
		return number(float64(x))
	case float64:
		return number(x)
	case float32:
		return number(float64(x))
	}
	data, err := json.Marshal(v)
	if err != nil {
		data = []byte(fmt.Sprint(v))
	}
	return &eventpb.HParamValue{Kind: &eventpb.HParamValue_StringValue{StringValue: string(data)}}
}

func number(x float64) *eventpb.HParamValue {
	return &eventpb.HParamValue{Kind: &eventpb.HParamValue_NumberValue{NumberValue: x}}
}

// isConfig says whether e is Config's event.
func isConfig(e *eventpb.Event) bool {
	for _, v := range e.GetSummary().GetValue() {
		if v.Tag == HParamsTag {
			return true
		}
	}
	return false
}
