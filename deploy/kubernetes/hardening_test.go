package kubernetes

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// podOf is the pod template of a workload, nil for other kinds.
func podOf(o any) (*metav1.ObjectMeta, *corev1.PodSpec) {
	switch o := o.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	case *batchv1.Job:
		return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template.ObjectMeta, &o.Spec.JobTemplate.Spec.Template.Spec
	}
	return nil, nil
}

// Every pod the manifests make passes the Pod Security Standards'
// "restricted" profile, as the admission controller of the newest
// Kubernetes release it knows judges it; and none mounts a service
// account token it has no use for.
func TestPodSecurityRestricted(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	pods := 0
	for _, d := range documents(t) {
		meta, spec := podOf(d.obj)
		if spec == nil {
			continue
		}
		pods++
		where := fmt.Sprintf("%s:%d", d.file, d.line)
		for _, r := range eval.EvaluatePod(lv, meta, spec) {
			if !r.Allowed {
				t.Errorf("%s: Pod Security restricted: %s: %s", where, r.ForbiddenReason, r.ForbiddenDetail)
			}
		}
		if a := spec.AutomountServiceAccountToken; a == nil || *a {
			t.Errorf("%s: automountServiceAccountToken is not false", where)
		}
	}
	if pods < 4 {
		t.Fatalf("judged %d pod templates, want every workload's (4)", pods)
	}
}

// The check itself fails a pod without a seccomp profile: the test above
// can fail.
func TestPodSecurityCheckCatchesMissingSeccomp(t *testing.T) {
	eval, _ := policy.NewEvaluator(policy.DefaultChecks(), nil)
	for _, d := range documents(t) {
		if dep, ok := d.obj.(*appsv1.Deployment); ok {
			spec := dep.Spec.Template.Spec.DeepCopy()
			spec.SecurityContext.SeccompProfile = nil
			agg := policy.AggregateCheckResults(eval.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, &dep.Spec.Template.ObjectMeta, spec))
			if agg.Allowed || !strings.Contains(agg.ForbiddenReason(), "seccompProfile") {
				t.Fatalf("no seccomp profile passed restricted: %+v", agg)
			}
			return
		}
	}
	t.Fatal("no Deployment")
}

// The canary: scraped through one object only (two would scrape it
// twice), a memory request above the 41 MiB it was measured to use, a
// writable state directory for --state, and a PodMonitor for the
// Prometheus Operator whose job the rules' selector names.
func TestCanaryDeployment(t *testing.T) {
	var dep *appsv1.Deployment
	var pm *monitoringv1.PodMonitor
	annotated := []string{}
	for _, d := range documents(t) {
		var meta metav1.ObjectMeta
		switch o := d.obj.(type) {
		case *appsv1.Deployment:
			dep = o
			meta = o.Spec.Template.ObjectMeta
			if o.Annotations["prometheus.io/scrape"] != "" {
				annotated = append(annotated, d.file+" Deployment")
			}
		case *corev1.Service:
			meta = o.ObjectMeta
		case *monitoringv1.PodMonitor:
			pm = o
			continue
		default:
			continue
		}
		if meta.Annotations["prometheus.io/scrape"] == "true" {
			annotated = append(annotated, fmt.Sprintf("%s:%d %s", d.file, d.line, meta.Name))
		}
	}
	if dep == nil || pm == nil {
		t.Fatalf("want the canary Deployment and a PodMonitor")
	}
	if len(annotated) != 1 {
		t.Errorf("prometheus.io/scrape on %d objects %v, want one", len(annotated), annotated)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if req := c.Resources.Requests[corev1.ResourceMemory]; req.Cmp(resource.MustParse("41Mi")) <= 0 {
		t.Errorf("memory request %s: not above the 41 MiB measured", req.String())
	}
	if !strings.Contains(strings.Join(c.Args, " "), "--state /var/lib/tailgate/") {
		t.Errorf("canary args %v: no --state under /var/lib/tailgate", c.Args)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("no /healthz liveness probe")
	}
	if !subset(pm.Spec.Selector.MatchLabels, dep.Spec.Template.Labels) || len(pm.Spec.PodMetricsEndpoints) != 1 ||
		pm.Spec.PodMetricsEndpoints[0].Port == nil || *pm.Spec.PodMetricsEndpoints[0].Port != c.Ports[0].Name {
		t.Errorf("the PodMonitor does not select the canary's pods and port: %+v", pm.Spec)
	}
	if job := dep.Spec.Template.Labels[pm.Spec.JobLabel]; job != "tailgate-canary" {
		t.Errorf("PodMonitor job label %q, want tailgate-canary (the rules' --selector in its comment)", job)
	}
}

// The scheduled canary pushes its figures and keeps no results on a
// shared volume; the merge Job can be created again without deleting the
// last one.
func TestCronJobPushesAndCleansUp(t *testing.T) {
	for _, d := range documents(t) {
		cj, ok := d.obj.(*batchv1.CronJob)
		if !ok {
			continue
		}
		spec := cj.Spec.JobTemplate.Spec.Template.Spec
		c := spec.Containers[0]
		if u, ok := arg(c, "--push"); !ok || !strings.HasPrefix(u, "http") {
			t.Errorf("%s: no --push URL in %v", cj.Name, c.Args)
		}
		out, _ := arg(c, "--out")
		for _, v := range spec.Volumes {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name && strings.HasPrefix(out, m.MountPath) && v.EmptyDir == nil {
					t.Errorf("%s: --out %s is on volume %s, which outlives the pod: results pile up", cj.Name, out, v.Name)
				}
			}
		}
		if cj.Spec.SuccessfulJobsHistoryLimit == nil || cj.Spec.FailedJobsHistoryLimit == nil {
			t.Errorf("%s: no Job history limits", cj.Name)
		}
	}
}

// `tailgate slo rules --format prometheusrule` decodes strictly into the
// Prometheus Operator's own PrometheusRule type, for the shipped SLO and
// for the one in the canary's ConfigMap, canary alerts included.
func TestPrometheusRuleDecodesStrictly(t *testing.T) {
	paths := []string{"../../testdata/slo/chat.yaml", "../../testdata/slo/chat-28d.yaml"}
	for _, d := range documents(t) {
		if cm, ok := d.obj.(*corev1.ConfigMap); ok && cm.Name == "tailgate-canary" {
			p := filepath.Join(t.TempDir(), "slo.yaml")
			os.WriteFile(p, []byte(cm.Data["slo.yaml"]), 0o644)
			paths = append(paths, p)
		}
	}
	for _, p := range paths {
		spec, err := slo.LoadSpec(p)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rules.Generate(spec, rules.Options{Version: "test", Selector: `job="tailgate-canary"`})
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.PrometheusRule("monitoring", map[string]string{"release": "prom"})
		if err != nil {
			t.Fatal(err)
		}
		var pr monitoringv1.PrometheusRule
		if err := yaml.UnmarshalStrict(b, &pr); err != nil {
			t.Fatalf("%s: PrometheusRule does not decode strictly: %v\n%s", p, err, b)
		}
		if pr.Kind != "PrometheusRule" || pr.APIVersion != "monitoring.coreos.com/v1" || pr.Name != "tailgate-slo-"+spec.Name ||
			pr.Namespace != "monitoring" || pr.Labels["release"] != "prom" {
			t.Errorf("%s: metadata %+v %+v", p, pr.TypeMeta, pr.ObjectMeta)
		}
		if len(pr.Spec.Groups) != len(r.File.Groups) {
			t.Errorf("%s: %d groups, generated %d", p, len(pr.Spec.Groups), len(r.File.Groups))
		}
		var down *monitoringv1.Rule
		for _, g := range pr.Spec.Groups {
			for i, rule := range g.Rules {
				if rule.Expr.String() == "" {
					t.Errorf("%s: group %s rule %d has no expr", p, g.Name, i)
				}
				if rule.Alert == rules.AlertCanaryDown {
					down = &g.Rules[i]
				}
			}
		}
		if down == nil || down.For == nil || string(*down.For) != "2m" || down.Labels["severity"] != "page" {
			t.Errorf("%s: canary-down alert %+v", p, down)
		}
	}
}

// The image: a multi-stage build whose last stage is distroless or scratch
// and runs as a numeric non-root user, with a static (CGO_ENABLED=0)
// binary carrying its version and revision; the manifests run the same
// user. Built with docker where a daemon answers; otherwise the file is
// all that is checked, and the test says so.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	type stage struct{ from, user string }
	var stages []stage
	env := map[string]string{}
	var build string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch strings.ToUpper(f[0]) {
		case "FROM":
			stages = append(stages, stage{from: f[1]})
		case "USER":
			stages[len(stages)-1].user = f[1]
		case "ENV":
			for _, kv := range f[1:] {
				if k, v, ok := strings.Cut(kv, "="); ok {
					env[k] = v
				}
			}
		case "RUN":
			if strings.Contains(line, "go build") {
				build = line
			}
		}
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages: want a build stage and a runtime stage", len(stages))
	}
	last := stages[len(stages)-1]
	if !strings.HasPrefix(last.from, "gcr.io/distroless/static") && last.from != "scratch" {
		t.Errorf("runtime stage FROM %s: want distroless static or scratch", last.from)
	}
	uid, _, _ := strings.Cut(last.user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("runtime USER %q: want a numeric non-root user (runAsNonRoot can only verify a number)", last.user)
	} else {
		for _, d := range documents(t) {
			if _, spec := podOf(d.obj); spec != nil && spec.SecurityContext.RunAsUser != nil && *spec.SecurityContext.RunAsUser != int64(n) {
				t.Errorf("%s:%d: runAsUser %d, the image's user is %d", d.file, d.line, *spec.SecurityContext.RunAsUser, n)
			}
		}
	}
	if env["CGO_ENABLED"] != "0" {
		t.Errorf("build stage CGO_ENABLED=%q: want 0 (a static binary for distroless static)", env["CGO_ENABLED"])
	}
	if !regexp.MustCompile(`-X github\.com/tailgate-llm/tailgate/internal/version\.revision=\$\{REVISION\}`).MatchString(build) || !strings.Contains(build, "./cmd/tailgate") {
		t.Errorf("go build line %q: want ./cmd/tailgate with -X github.com/tailgate-llm/tailgate/internal/version.revision=${REVISION}", build)
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no container builder here (docker info: %v: %s): the Dockerfile was checked, not built",
			err, strings.TrimSpace(string(bytes.SplitN(out, []byte("\n"), 2)[0])))
	}
	tag := "tailgate-test:" + strconv.Itoa(os.Getpid())
	cmd := exec.Command("docker", "build", "-q", "--build-arg", "REVISION=test", "-t", tag, "../..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
	defer exec.Command("docker", "rmi", tag).Run()
	out, err := exec.Command("docker", "run", "--rm", tag, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "revision test") {
		t.Errorf("docker run %s version: %v %s", tag, err, out)
	}
	size, _ := exec.Command("docker", "image", "inspect", "-f", "{{.Size}}", tag).Output()
	t.Logf("image %s: %s bytes", tag, strings.TrimSpace(string(size)))
}
