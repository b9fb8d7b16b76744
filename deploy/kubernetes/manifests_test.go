package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/slo"
)

// kinds maps apiVersion/kind to the API type a manifest must decode into.
// A kind not listed fails the test: add it here when adding a manifest.
var kinds = map[string]func() any{
	"batch/v1/Job":                        func() any { return &batchv1.Job{} },
	"batch/v1/CronJob":                    func() any { return &batchv1.CronJob{} },
	"apps/v1/Deployment":                  func() any { return &appsv1.Deployment{} },
	"v1/ConfigMap":                        func() any { return &corev1.ConfigMap{} },
	"v1/PersistentVolumeClaim":            func() any { return &corev1.PersistentVolumeClaim{} },
	"v1/Service":                          func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                   func() any { return &corev1.ServiceAccount{} },
	"v1/Secret":                           func() any { return &corev1.Secret{} },
	"monitoring.coreos.com/v1/PodMonitor": func() any { return &monitoringv1.PodMonitor{} },
}

// doc is one YAML document of a manifest file.
type doc struct {
	file string
	line int // where the document starts
	raw  []byte
	obj  any
}

// documents splits every *.yaml of the directory into documents and
// decodes each strictly: an unknown or misplaced field, a duplicate key
// or a wrong type is an error naming file and line.
func documents(t *testing.T) []doc {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var out []doc
	sep := regexp.MustCompile(`(?m)^---\s*$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		starts := append([]int{0}, func() []int {
			var s []int
			for _, m := range sep.FindAllIndex(b, -1) {
				s = append(s, m[1])
			}
			return s
		}()...)
		for i, from := range starts {
			to := len(b)
			if i+1 < len(starts) {
				to = sep.FindAllIndex(b, -1)[i][0]
			}
			raw := b[from:to]
			if len(bytes.TrimSpace(stripComments(raw))) == 0 {
				continue
			}
			d := doc{file: f, line: bytes.Count(b[:from], []byte("\n")) + 1, raw: raw}
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal(raw, &tm); err != nil {
				t.Errorf("%s:%d: %v", f, d.line, err)
				continue
			}
			key := tm.APIVersion + "/" + tm.Kind
			mk, ok := kinds[key]
			if !ok || mk == nil {
				t.Errorf("%s:%d: apiVersion %q kind %q: no API type to check it against (add it to kinds)", f, d.line, tm.APIVersion, tm.Kind)
				continue
			}
			d.obj = mk()
			if err := yaml.UnmarshalStrict(raw, d.obj); err != nil {
				t.Errorf("%s:%d: %s: %v", f, d.line, key, err)
				continue
			}
			out = append(out, d)
		}
	}
	return out
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

// Every manifest decodes strictly into its API type, names itself, and
// sets what the API server requires of its kind.
func TestManifestsDecodeStrictly(t *testing.T) {
	for _, d := range documents(t) {
		var pod *corev1.PodSpec
		where := fmt.Sprintf("%s:%d", d.file, d.line)
		switch o := d.obj.(type) {
		case *batchv1.Job:
			pod = &o.Spec.Template.Spec
			checkName(t, where, o.Name+o.GenerateName)
		case *batchv1.CronJob:
			pod = &o.Spec.JobTemplate.Spec.Template.Spec
			checkName(t, where, o.Name)
			if len(strings.Fields(o.Spec.Schedule)) != 5 {
				t.Errorf("%s: schedule %q: want five cron fields", where, o.Spec.Schedule)
			}
		case *appsv1.Deployment:
			pod = &o.Spec.Template.Spec
			checkName(t, where, o.Name)
			if o.Spec.Selector == nil || !subset(o.Spec.Selector.MatchLabels, o.Spec.Template.Labels) {
				t.Errorf("%s: the selector does not match the pod template's labels", where)
			}
		case *corev1.ConfigMap:
			checkName(t, where, o.Name)
		case *corev1.PersistentVolumeClaim:
			checkName(t, where, o.Name)
		}
		if pod == nil {
			continue
		}
		if len(pod.Containers) == 0 {
			t.Errorf("%s: no containers", where)
		}
		if d.obj != nil {
			if _, isDeploy := d.obj.(*appsv1.Deployment); !isDeploy && pod.RestartPolicy != corev1.RestartPolicyNever && pod.RestartPolicy != corev1.RestartPolicyOnFailure {
				t.Errorf("%s: a Job's pods need restartPolicy Never or OnFailure, not %q", where, pod.RestartPolicy)
			}
		}
		vols := map[string]bool{}
		for _, v := range pod.Volumes {
			vols[v.Name] = true
		}
		for _, c := range append(append([]corev1.Container{}, pod.InitContainers...), pod.Containers...) {
			if c.Image == "" {
				t.Errorf("%s: container %s has no image", where, c.Name)
			}
			for _, m := range c.VolumeMounts {
				if !vols[m.Name] {
					t.Errorf("%s: container %s mounts volume %q, which the pod does not declare", where, c.Name, m.Name)
				}
			}
			defined := map[string]bool{"JOB_COMPLETION_INDEX": isIndexed(d.obj)}
			for _, e := range c.Env {
				defined[e.Name] = true
			}
			for _, a := range c.Args {
				for _, m := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(a, -1) {
					if !defined[m[1]] {
						t.Errorf("%s: container %s: arg %q uses $(%s), which is not in its env (Kubernetes would pass it literally)", where, c.Name, a, m[1])
					}
				}
			}
		}
	}
}

func checkName(t *testing.T, where, name string) {
	if name == "" {
		t.Errorf("%s: no metadata.name (or generateName)", where)
	}
}

func subset(a, b map[string]string) bool {
	if len(a) == 0 {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func isIndexed(o any) bool {
	j, ok := o.(*batchv1.Job)
	return ok && j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
}

func arg(c corev1.Container, flag string) (string, bool) {
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

// The shards Job and the merge Job agree: the Job is Indexed with as many
// completions as pods at once and as --shard's N, each shard writes the
// directory the merge Job reads, every index is merged once, on the same
// volume.
func TestShardsAndMergeAgree(t *testing.T) {
	var shards, merge *batchv1.Job
	for _, d := range documents(t) {
		if j, ok := d.obj.(*batchv1.Job); ok {
			switch j.Name {
			case "tailgate-shards":
				shards = j
			}
			if j.GenerateName == "tailgate-merge-" {
				merge = j
			}
		}
	}
	if shards == nil || merge == nil {
		t.Fatal("want Jobs tailgate-shards and tailgate-merge-* (generateName)")
	}
	if !isIndexed(shards) || shards.Spec.Completions == nil || shards.Spec.Parallelism == nil || *shards.Spec.Completions != *shards.Spec.Parallelism {
		t.Fatalf("tailgate-shards: want an Indexed Job with completions = parallelism (every shard at once)")
	}
	n := int(*shards.Spec.Completions)
	c := shards.Spec.Template.Spec.Containers[0]
	shard, ok := arg(c, "--shard")
	if !ok || shard != "$(JOB_COMPLETION_INDEX)/"+strconv.Itoa(n) {
		t.Errorf("tailgate-shards: --shard %q, want $(JOB_COMPLETION_INDEX)/%d", shard, n)
	}
	if _, judged := arg(c, "--slo"); judged {
		t.Errorf("tailgate-shards: --slo judges a partial load, and its exit 1 fails the Job; the merge Job judges the whole")
	}
	out, _ := arg(c, "--out")
	if !strings.Contains(out, "$(JOB_COMPLETION_INDEX)") {
		t.Errorf("tailgate-shards: --out %q: every shard needs its own directory", out)
	}
	var mc *corev1.Container
	for i, ic := range merge.Spec.Template.Spec.InitContainers {
		if len(ic.Args) > 0 && ic.Args[0] == "merge" {
			mc = &merge.Spec.Template.Spec.InitContainers[i]
		}
	}
	if mc == nil {
		t.Fatal("tailgate-merge: no container runs merge")
	}
	var dirs []string
	for _, a := range mc.Args[1:] {
		if !strings.HasPrefix(a, "-") {
			dirs = append(dirs, a)
		}
	}
	if len(dirs) != n {
		t.Errorf("tailgate-merge merges %d directories, the shards Job writes %d", len(dirs), n)
	}
	for i, d := range dirs {
		if want := strings.ReplaceAll(out, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i)); d != want {
			t.Errorf("tailgate-merge: directory %d is %q, shard %d writes %q", i, d, i, want)
		}
	}
	claim := func(j *batchv1.Job) string {
		for _, v := range j.Spec.Template.Spec.Volumes {
			if v.Name == "results" && v.PersistentVolumeClaim != nil {
				return v.PersistentVolumeClaim.ClaimName
			}
		}
		return ""
	}
	if a, b := claim(shards), claim(merge); a == "" || a != b {
		t.Errorf("results volume: shards on claim %q, merge on %q", a, b)
	}
	env := func(c corev1.Container, k string) string {
		for _, e := range c.Env {
			if e.Name == k {
				return e.Value
			}
		}
		return ""
	}
	if a, b := env(c, "RUN_ID"), env(*mc, "RUN_ID"); a != b {
		t.Errorf("RUN_ID: shards %q, merge %q", a, b)
	}
}

// The ConfigMap's mix and SLO are files tailgate loads: a mistake in them
// fails here, not in every pod.
func TestConfigFilesLoad(t *testing.T) {
	for _, d := range documents(t) {
		cm, ok := d.obj.(*corev1.ConfigMap)
		if !ok {
			continue
		}
		dir := t.TempDir()
		for name, body := range cm.Data {
			p := filepath.Join(dir, name)
			os.WriteFile(p, []byte(body), 0o644)
			var err error
			switch {
			case strings.Contains(body, "kind: Mix"):
				_, err = prompts.LoadMix(p, prompts.LoadOptions{})
			case strings.Contains(body, "kind: SLO"):
				_, err = slo.LoadSpec(p)
			}
			if err != nil {
				t.Errorf("%s:%d: ConfigMap %s, %s: %v", d.file, d.line, cm.Name, name, err)
			}
		}
	}
}
