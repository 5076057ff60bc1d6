/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/certs"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// The webhook scenario loads the no-downscale admission webhook of one
// operator the way API servers would: AdmissionReviews of `kubectl scale`
// on StatefulSets guarded by a ScalingPolicy with downscale.allowed=false,
// POSTed over HTTPS straight to the operator's loopback port by many clients
// at a fixed offered rate. It needs no pods, so its control plane is etcd and
// kube-apiserver alone.
const (
	// targetWebhookP99 is the latency the issue measures the held rate against.
	targetWebhookP99 = 10 * time.Millisecond
	// webhookWarmup precedes the first measured load: connections open, the
	// operator's code paths and the bench's warm up.
	webhookWarmup = 5 * time.Second
	// increaseEvery: one request in increaseEvery grows a StatefulSet (the
	// webhook admits it); the others shrink one (it denies them, naming the
	// policy, after looking it up).
	increaseEvery = 5
	// freshEvery: during the rotation, one request in freshEvery goes on a
	// new connection, so handshakes meet whatever certificate is served.
	freshEvery = 10
	// rotationWindow is how long before and after the switch of the served
	// certificate the rotation window runs; the CA's own rotation, a few
	// seconds before the switch, falls in it.
	rotationWindow = 10 * time.Second
	// guardedReplicas are the replicas of every guarded StatefulSet.
	guardedReplicas = 3
	// webhookCertSecret is --webhook-cert-secret, the name the operator's
	// certificate Role grants.
	webhookCertSecret = "echelon-webhook-tls"
	noDownscalePath   = "/admission/no-downscale"
	evictionPath      = "/admission/eviction"
	webhookHost       = "127.0.0.1"
)

// webhookOptions are the flags of the webhook scenario.
type webhookOptions struct {
	clients      int
	policies     int
	rate         float64
	steady       time.Duration
	steps        rateList
	step         time.Duration
	certValidity time.Duration
}

func bindWebhookFlags(fs *flag.FlagSet, o *webhookOptions) {
	*o = webhookOptions{
		clients: 64, policies: 50, rate: 1000, steady: 20 * time.Second,
		// Up to a rate this machine's two cores cannot serve with the clients
		// on them too, so that the steps find where p99 passes the limit.
		steps: rateList{250, 500, 1000, 2000, 4000, 8000, 16000}, step: 10 * time.Second,
		certValidity: time.Minute,
	}
	fs.IntVar(&o.clients, "webhook-clients", o.clients, "Concurrent HTTPS clients of the webhook scenario, each with a kept-alive connection.")
	fs.IntVar(&o.policies, "webhook-policies", o.policies, "Guarded StatefulSets of the webhook scenario, each with its ScalingPolicy.")
	fs.Float64Var(&o.rate, "webhook-rate", o.rate, "Requests per second of the webhook scenario's steady load and of its certificate rotation.")
	fs.DurationVar(&o.steady, "webhook-steady", o.steady, "How long the webhook scenario's steady load lasts.")
	fs.Var(&o.steps, "webhook-steps", "Comma-separated offered rates (requests per second) the webhook scenario steps through, lowest first.")
	fs.DurationVar(&o.step, "webhook-step", o.step, "How long each step of --webhook-steps lasts.")
	fs.DurationVar(&o.certValidity, "webhook-cert-validity", o.certValidity, "Lifetime of the serving certificate and of the CA during the rotation; each is renewed after two thirds of it (the operator accepts 1m at least).")
}

func (o webhookOptions) validate() error {
	switch {
	case o.clients < 1 || o.policies < 1:
		return errors.New("--webhook-clients and --webhook-policies must be at least 1")
	case o.rate <= 0 || o.steady <= 0 || o.step <= 0:
		return errors.New("--webhook-rate, --webhook-steady and --webhook-step must be positive")
	case !slices.IsSorted(o.steps):
		return errors.New("--webhook-steps must go from the lowest rate to the highest")
	case o.certValidity < time.Minute:
		return errors.New("--webhook-cert-validity must be at least 1m, as the operator's flag")
	}
	return nil
}

// rateList is a flag of comma-separated positive rates.
type rateList []float64

func (l *rateList) String() string {
	parts := make([]string, len(*l))
	for i, r := range *l {
		parts[i] = strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (l *rateList) Set(v string) error {
	var out rateList
	for _, p := range strings.Split(v, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return err
		}
		if r <= 0 {
			return errors.New("rates must be positive")
		}
		out = append(out, r)
	}
	*l = out
	return nil
}

// webhookResult is what the webhook scenario measured. Durations are in seconds.
type webhookResult struct {
	Clients       int    `json:"clients"`
	Guarded       int    `json:"guardedStatefulSets"`
	IncreaseEvery int    `json:"oneRequestInNIsAnIncrease"`
	URL           string `json:"url"`
	// Protocols are the HTTP versions the answers came in.
	Protocols []string `json:"protocols"`
	// APIServerDenial is what the API server answered a dry-run `kubectl
	// scale` down of a guarded StatefulSet: the webhook works end to end.
	APIServerDenial string `json:"apiServerDenial"`
	// FirstErrors hold the first message of each kind of failure of any phase.
	FirstErrors map[string]string `json:"firstErrors,omitempty"`

	Steady          webhookStep   `json:"steady"`
	Steps           []webhookStep `json:"steps"`
	P99LimitSeconds float64       `json:"p99LimitSeconds"`
	// HeldPerSecond is the highest step whose p99 stayed within the limit
	// with no request failed or dropped and its rate achieved; 0 when none.
	HeldPerSecond float64         `json:"heldPerSecond"`
	Rotation      *rotationResult `json:"rotation,omitempty"`
	OperatorLogs  []string        `json:"operatorLogs"`
}

// webhookStep is a stretch of load with what the operator and the bench used.
type webhookStep struct {
	latencySummary
	Held               bool    `json:"held"`
	OperatorCPUSeconds float64 `json:"operatorCPUSeconds"`
	BenchCPUSeconds    float64 `json:"benchCPUSeconds"`
	// OthersCPUSeconds is the machine's busy time less the operator's and the
	// bench's: the API server, etcd, and anything else running meanwhile.
	OthersCPUSeconds float64 `json:"othersCPUSeconds"`
	// OperatorRequests are the operator's API requests during the stretch.
	OperatorRequests map[string]int `json:"operatorRequestsByVerb,omitempty"`
}

// rotationResult is the load across a certificate rotation.
type rotationResult struct {
	CertValidity string `json:"certValidity"`
	CAValidity   string `json:"caValidity"`
	FreshEvery   int    `json:"oneRequestInNOnANewConnection"`
	// Served are the certificates handshakes met, in order: Served[0] before
	// the rotation, Served[1] after.
	Served []servedCert `json:"served"`
	// SwitchSeconds runs from the operator's start to the first handshake
	// that met Served[1].
	SwitchSeconds float64 `json:"switchSeconds"`
	// BundleChangesSeconds are when the clients took a new injected CA
	// bundle during the load, relative to the switch.
	BundleChangesSeconds []float64      `json:"bundleChangesSeconds"`
	Whole                webhookStep    `json:"whole"`
	Window               latencySummary `json:"window"`
	WindowFromSeconds    float64        `json:"windowFromSeconds"` // relative to the switch
	WindowToSeconds      float64        `json:"windowToSeconds"`
	// BySecond are the seconds of the load, numbered from the switch.
	BySecond []secondSummary `json:"bySecond"`
	// OperatorRotations is the operator's
	// echelon_webhook_certificate_rotations_total at the end, "" if not exported.
	OperatorRotations string `json:"operatorRotationsTotal"`
}

// webhookRun is the state of one run of the scenario.
type webhookRun struct {
	cfg   runConfig
	o     webhookOptions
	cp    *controlplane.ControlPlane
	ns    string
	user  *controlplane.User
	port  int
	trust *trust
	// load sends reviews straight to the no-downscale webhook; nil in runs
	// that do not load it that way.
	load *loadClient
	res  *webhookResult
	// logs are the log files of the operators started so far.
	logs []string
	say  func(format string, args ...any)
}

// runWebhook measures the webhook scenario on a fresh control plane: a steady
// load, the rate steps, and a certificate rotation under load.
func runWebhook(ctx context.Context, cfg runConfig, o webhookOptions) (_ *webhookResult, retErr error) {
	say := cfg.say
	began := time.Now()
	cp, ns, stop, err := startControlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop(&retErr)
	say("control plane (etcd and kube-apiserver) up in %s", since(began))

	r := &webhookRun{cfg: cfg, o: o, cp: cp, ns: ns, say: say, trust: newTrust(webhookHost)}
	if r.port, err = framework.FreePort(); err != nil {
		return nil, err
	}
	url := fmt.Sprintf("https://%s:%d%s?timeout=%s", webhookHost, r.port, noDownscalePath, webhookTimeout)
	r.res = &webhookResult{
		Clients: o.clients, Guarded: o.policies, IncreaseEvery: increaseEvery, URL: url,
		P99LimitSeconds: targetWebhookP99.Seconds(), FirstErrors: map[string]string{},
	}
	began = time.Now()
	guarded, err := createGuarded(ctx, cp.Client(), ns, o.policies)
	if err != nil {
		return nil, err
	}
	templates, err := reviewTemplates(guarded)
	if err != nil {
		return nil, err
	}
	r.load = newLoadClient(url, o.clients, r.trust.tlsConfig(), templates)
	stopWatch, err := r.serve(ctx, noDownscaleWebhook)
	if err != nil {
		return nil, err
	}
	// Before the control plane stops: the API server waits for open watches.
	defer stopWatch()
	say("created %d StatefulSets with a guarding ScalingPolicy each and the webhook configuration in %s", o.policies, since(began))

	if err := r.measureSteadyAndSteps(ctx); err != nil {
		return nil, err
	}
	if err := r.measureRotation(ctx); err != nil {
		return nil, err
	}
	r.res.OperatorLogs = r.logs
	return r.res, nil
}

// measureSteadyAndSteps runs an operator with its certificate for a year,
// and measures the steady load and every step.
func (r *webhookRun) measureSteadyAndSteps(ctx context.Context) (retErr error) {
	ops, err := r.startOperator(ctx, r.cfg.workDir)
	defer func() { retErr = errors.Join(retErr, ops.stop()) }()
	if err != nil {
		return err
	}
	if r.res.APIServerDenial, err = r.checkThroughAPIServer(ctx, ops); err != nil {
		return err
	}
	o := r.o
	r.say("warm-up: %s at %.0f/s", webhookWarmup, o.rate)
	warm := r.load.run(ctx, loadPlan{rate: o.rate, duration: webhookWarmup})
	r.noteErrors(warm)
	var runs []loadRun
	step, run, err := r.measure(ctx, ops, loadPlan{rate: o.rate, duration: o.steady})
	if err != nil {
		return err
	}
	r.res.Steady, runs = step, append(runs, run)
	r.say("steady %.0f/s for %s: %s", o.rate, o.steady, describe(step.latencySummary))
	var summaries []latencySummary
	for _, rate := range o.steps {
		step, run, err := r.measure(ctx, ops, loadPlan{rate: rate, duration: o.step})
		if err != nil {
			return err
		}
		r.res.Steps, runs = append(r.res.Steps, step), append(runs, run)
		summaries = append(summaries, step.latencySummary)
		r.say("step %.0f/s for %s: %s", rate, o.step, describe(step.latencySummary))
	}
	r.res.HeldPerSecond, _ = highestHeld(summaries, targetWebhookP99)
	r.res.Protocols = protocolsOf(runs...)
	return nil
}

// measureRotation restarts the operator with certificates that live
// --webhook-cert-validity, holds --webhook-rate across the first rotation
// (the CA's, then the serving certificate's) with one request in freshEvery
// on a new connection, and ends rotationWindow after the switch.
func (r *webhookRun) measureRotation(ctx context.Context) (retErr error) {
	// A fresh Secret, so that the operator creates certificates of the short
	// lifetime rather than keep the year-long ones.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: webhookCertSecret}}
	if err := r.cp.Client().Delete(ctx, secret); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the certificate Secret: %w", err)
	}
	r.load.closeIdle()
	r.trust.forget()
	logDir := filepath.Join(r.cfg.workDir, "rotation")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return err
	}
	validity := r.o.certValidity.String()
	started := time.Now()
	ops, err := r.startOperator(ctx, logDir, "--webhook-cert-validity="+validity, "--webhook-ca-validity="+validity)
	defer func() { retErr = errors.Join(retErr, ops.stop()) }()
	if err != nil {
		return err
	}
	res := &rotationResult{CertValidity: validity, CAValidity: validity, FreshEvery: freshEvery}
	r.res.Rotation = res

	stop := make(chan struct{})
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	limit := 2*r.o.certValidity + 30*time.Second
	r.say("certificate rotation: %.0f/s, 1 request in %d on a new connection, until %s after the served certificate changes (at most %s)",
		r.o.rate, freshEvery, rotationWindow, limit)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			if served := r.trust.servedCerts(); len(served) > 1 && time.Since(served[1].First) >= rotationWindow {
				close(stop)
				return
			}
			select {
			case <-tick.C:
			case <-watchCtx.Done():
				return
			}
		}
	}()
	step, run, err := r.measure(ctx, ops, loadPlan{rate: r.o.rate, duration: limit, freshEvery: freshEvery, stop: stop})
	if err != nil {
		return err
	}
	res.Whole = step
	res.Served = r.trust.servedCerts()
	if len(res.Served) < 2 {
		return fmt.Errorf("the served certificate did not change within %s of load (handshakes met %d certificate(s))\n%s", limit, len(res.Served), operatorLogs(ops))
	}
	switchAt := res.Served[1].First
	res.SwitchSeconds = switchAt.Sub(started).Seconds()
	for _, at := range r.trust.bundleChanges() {
		if !at.Before(run.began) {
			res.BundleChangesSeconds = append(res.BundleChangesSeconds, at.Sub(switchAt).Seconds())
		}
	}
	from := max(switchAt.Sub(run.began)-rotationWindow, 0)
	to := min(switchAt.Sub(run.began)+rotationWindow, run.elapsed)
	res.Window = summarize(within(run.samples, from, to), r.o.rate, to-from, 0)
	res.WindowFromSeconds, res.WindowToSeconds = (from - switchAt.Sub(run.began)).Seconds(), (to - switchAt.Sub(run.began)).Seconds()
	res.BySecond = bySecond(run.samples, switchAt.Sub(run.began))
	res.OperatorRotations = metricValue(ops[0], "echelon_webhook_certificate_rotations_total")
	r.say("served certificate %s -> %s at %.1fs; window: %s", res.Served[0].Serial, res.Served[1].Serial, res.SwitchSeconds, describe(res.Window))
	return nil
}

// startOperator starts one operator serving the webhook on the run's port,
// waits until it is ready, the clients trust the CA bundle it injected, and
// the webhook answers a review right.
func (r *webhookRun) startOperator(ctx context.Context, logDir string, flags ...string) (operators, error) {
	cfg := r.cfg
	cfg.workDir, cfg.operatorLogDir = logDir, logDir
	// startOperators puts these after its own flags.
	cfg.operatorLogArgs = append(slices.Clone(cfg.operatorLogArgs),
		"--webhook-port="+strconv.Itoa(r.port),
		"--webhook-bind-host="+webhookHost,
		"--webhook-cert-extra-sans="+webhookHost,
		"--webhook-cert-secret="+webhookCertSecret,
	)
	cfg.operatorLogArgs = append(cfg.operatorLogArgs, flags...)
	began := time.Now()
	ops, err := startOperators(ctx, cfg, r.user, r.ns)
	if err != nil {
		return ops, err
	}
	r.logs = append(r.logs, ops[0].LogFile)
	if err := withTimeout(ctx, r.cfg.timeout, r.waitServing); err != nil {
		return ops, fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	r.say("operator ready and serving its webhooks in %s", since(began))
	return ops, nil
}

// waitServing waits until the webhook configuration carries the bundle of
// the certificate Secret (the operator injected it) and, when the run loads
// the no-downscale webhook directly, a review sent straight to it is
// answered right.
func (r *webhookRun) waitServing(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		secret := &corev1.Secret{}
		if err := r.cp.Client().Get(ctx, client.ObjectKey{Namespace: r.ns, Name: webhookCertSecret}, secret); err != nil {
			last = fmt.Sprintf("certificate Secret: %v", err)
			return false, client.IgnoreNotFound(err)
		}
		if bundle := secret.Data[certs.KeyCABundle]; len(bundle) == 0 || !bytes.Equal(bundle, r.trust.currentBundle()) {
			last = "the webhook configuration does not carry the Secret's CA bundle yet"
			return false, nil
		}
		if r.load == nil {
			return true, nil
		}
		kind, detail, _ := r.load.send(ctx, r.load.sent.Add(1), true)
		if kind != "" {
			last = fmt.Sprintf("%s: %s", kind, detail)
			if strings.Contains(detail, "HTTP 404") {
				last += " (does the operator serve " + noDownscalePath + " yet?)"
			}
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the webhook to answer: %s: %w", last, err)
	}
	return nil
}

// checkThroughAPIServer asks the API server, in a dry run, to scale a guarded
// StatefulSet down through /scale, as `kubectl scale` does: the webhook
// configuration, the injected CA and the handler must work together for the
// denial to name the policy. The API server may take a moment to use a new
// webhook configuration, so an admission is asked again.
func (r *webhookRun) checkThroughAPIServer(ctx context.Context, ops operators) (denial string, _ error) {
	c := r.cp.Client()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: guardedName(0)}}
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: sts.Name}, Spec: autoscalingv1.ScaleSpec{Replicas: guardedReplicas - 1}}
	var last error
	err := withTimeout(ctx, r.cfg.timeout, func(ctx context.Context) error {
		return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			last = c.SubResource("scale").Update(ctx, sts, client.WithSubResourceBody(scale), client.DryRunAll)
			return last != nil && strings.Contains(last.Error(), policyName(0)), nil
		})
	})
	if err != nil {
		return "", fmt.Errorf("a dry-run scale of %s down through the API server: want a denial naming %s, got %v\n%s", sts.Name, policyName(0), last, operatorLogs(ops))
	}
	r.say("the API server denies scaling %s down: %s", sts.Name, last)
	return last.Error(), nil
}

// measure runs plan and records what the operator, the bench and the rest of
// the machine used meanwhile.
func (r *webhookRun) measure(ctx context.Context, ops operators, plan loadPlan) (webhookStep, loadRun, error) {
	pid := ops[0].pid
	before, err := cpuNow(pid)
	if err != nil {
		return webhookStep{}, loadRun{}, err
	}
	countsBefore := ops.counts()
	run := r.load.run(ctx, plan)
	if err := ctx.Err(); err != nil {
		return webhookStep{}, run, err
	}
	after, err := cpuNow(pid)
	if err != nil {
		return webhookStep{}, run, fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	r.noteErrors(run)
	step := webhookStep{
		latencySummary:     summarize(run.samples, plan.rate, run.elapsed, run.dropped),
		OperatorCPUSeconds: after.operator - before.operator,
		BenchCPUSeconds:    after.bench - before.bench,
		OperatorRequests:   diffCounts(ops.counts(), countsBefore),
	}
	step.OthersCPUSeconds = max(after.machine-before.machine-step.OperatorCPUSeconds-step.BenchCPUSeconds, 0)
	step.Held = step.holds(targetWebhookP99)
	return step, run, nil
}

// cpuTimes are the CPU seconds used so far by the operator, the bench and
// the whole machine.
type cpuTimes struct{ operator, bench, machine float64 }

func cpuNow(operatorPID int) (cpuTimes, error) {
	var t cpuTimes
	var err error
	if t.operator, err = cpuSeconds(operatorPID); err != nil {
		return t, fmt.Errorf("the operator's CPU time (has it exited?): %w", err)
	}
	if t.bench, err = cpuSeconds(os.Getpid()); err != nil {
		return t, err
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t, err
	}
	t.machine, err = parseMachineBusy(string(stat))
	return t, err
}

// parseMachineBusy reads the time every CPU spent busy from the first line
// of /proc/stat: user, nice, system, irq, softirq and steal, in USER_HZ
// ticks (guest time is part of user).
func parseMachineBusy(stat string) (float64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: cannot read %q", line)
	}
	var busy uint64
	for i, f := range fields[1:9] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat field %d: %w", i+1, err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return float64(busy) / clockTicksPerSecond, nil
}

func (r *webhookRun) noteErrors(run loadRun) {
	for kind, detail := range run.details {
		if r.res.FirstErrors[kind] == "" {
			r.res.FirstErrors[kind] = detail
		}
	}
}

// watchBundle keeps the clients' trust on the CA bundle injected into the
// webhook configuration, as the API server's webhook client does, until the
// returned stop.
func (r *webhookRun) watchBundle(ctx context.Context) (stop func(), _ error) {
	cs, err := kubernetes.NewForConfig(r.cp.Config())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + webhookConfigName(r.ns)
	}))
	stop = func() {
		cancel()
		factory.Shutdown()
	}
	informer := factory.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer()
	take := func(obj any) {
		if vwc, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok && len(vwc.Webhooks) > 0 {
			if err := r.trust.setBundle(vwc.Webhooks[0].ClientConfig.CABundle, time.Now()); err != nil {
				r.say("ignoring the injected bundle: %v", err)
			}
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: take, UpdateFunc: func(_, obj any) { take(obj) },
	}); err != nil {
		stop()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		stop()
		return nil, errors.New("the watch of the webhook configuration did not sync")
	}
	return stop, nil
}

func guardedName(i int) string { return fmt.Sprintf("guarded-%02d", i) }
func policyName(i int) string  { return fmt.Sprintf("guard-%02d", i) }

// createGuarded creates n StatefulSets, each guarded by a ScalingPolicy with
// no source and downscale.allowed=false, and returns the StatefulSets as
// created.
func createGuarded(ctx context.Context, c client.Client, ns string, n int) ([]*appsv1.StatefulSet, error) {
	sets := make([]*appsv1.StatefulSet, n)
	err := forEach(ctx, n, createWorkers, func(ctx context.Context, i int) error {
		sts := statefulSet(ns, guardedName(i), guardedReplicas, oldImage)
		if err := c.Create(ctx, sts); err != nil {
			return fmt.Errorf("create StatefulSet %s: %w", sts.Name, err)
		}
		sets[i] = sts
		sp := &v1alpha1.ScalingPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: policyName(i)},
			Spec: v1alpha1.ScalingPolicySpec{
				TargetRef: v1alpha1.PolicyTargetReference{Name: sts.Name},
				Downscale: &v1alpha1.DownscaleRules{Allowed: ptr.To(false)},
			},
		}
		if err := c.Create(ctx, sp); err != nil {
			return fmt.Errorf("create ScalingPolicy %s: %w", sp.Name, err)
		}
		return nil
	})
	return sets, err
}

// reviewTemplates are the reviews the clients send in turn: every guarded
// StatefulSet in turn, and in each round of len(sets) requests a different
// fifth of them grows, so that every StatefulSet sees increases and
// decreases and one request in increaseEvery is an increase.
func reviewTemplates(sets []*appsv1.StatefulSet) ([]reviewTemplate, error) {
	var out []reviewTemplate
	n := len(sets)
	for k := range n * increaseEvery {
		i := k % n
		to := int32(guardedReplicas - 1)
		if isIncrease(k, n) {
			to = guardedReplicas + 1
		}
		t, err := newReviewTemplate(sets[i], policyName(i), guardedReplicas, to)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// isIncrease tells whether the k-th review of rounds of n is an increase: in
// every increaseEvery rounds, each StatefulSet grows once.
func isIncrease(k, n int) bool { return (k%n+k/n)%increaseEvery == increaseEvery-1 }

func webhookConfigName(ns string) string { return "echelon-bench-" + ns }

// servedWebhook is a webhook of the operator that a run registers with the
// API server: its name, path and the requests it is sent, as
// config/webhook/manifests.yaml has them.
type servedWebhook struct {
	name string
	path string
	rule admissionregistrationv1.RuleWithOperations
}

var (
	noDownscaleWebhook = servedWebhook{name: "no-downscale.echelon.dev", path: noDownscalePath, rule: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
			Resources: []string{"statefulsets", "statefulsets/scale", "deployments", "deployments/scale", "replicasets", "replicasets/scale"}},
	}}
	evictionWebhook = servedWebhook{name: "eviction.echelon.dev", path: evictionPath, rule: admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"}},
	}}
)

// registerWebhooks registers the webhooks as the chart does (failure policy,
// match policy, side effects, timeout), for ns alone and at the loopback URL, in one
// configuration labelled for the operator to inject its CA bundle.
func registerWebhooks(ctx context.Context, c client.Client, ns string, port int, hooks ...servedWebhook) error {
	fail, equivalent, noneOnDryRun := admissionregistrationv1.Fail, admissionregistrationv1.Equivalent, admissionregistrationv1.SideEffectClassNoneOnDryRun
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: webhookConfigName(ns), Labels: map[string]string{certs.InjectCALabel: ns + "." + webhookCertSecret}},
	}
	for _, h := range hooks {
		vwc.Webhooks = append(vwc.Webhooks, admissionregistrationv1.ValidatingWebhook{
			Name:          h.name,
			ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://%s:%d%s", webhookHost, port, h.path))},
			Rules:         []admissionregistrationv1.RuleWithOperations{h.rule},
			FailurePolicy: &fail, MatchPolicy: &equivalent, SideEffects: &noneOnDryRun,
			TimeoutSeconds:          ptr.To(int32(webhookTimeout / time.Second)),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
		})
	}
	if err := c.Create(ctx, vwc); err != nil {
		return fmt.Errorf("create ValidatingWebhookConfiguration %s: %w", vwc.Name, err)
	}
	return nil
}

// metricValue is the value of an unlabelled metric on the operator's
// /metrics, "" when it is not there.
func metricValue(in *instance, name string) string {
	code, body, err := in.Get("/metrics")
	if err != nil || code != 200 {
		return ""
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
