package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/semver"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The labels the chart (and install.yaml, rendered from it) puts on the
// operator's Deployment.
const (
	labelPartOf  = "app.kubernetes.io/part-of"
	labelVersion = "app.kubernetes.io/version"
	partOf       = "echelon"
)

// operatorInstall is one operator Deployment found in the cluster.
type operatorInstall struct {
	namespace, name, version string
}

func newVersionCommand(o *options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version and the operator's, warning when they differ",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(o.streams.Out, "kubectl-echelon: %s\n", o.version)
			if clientOnly {
				return nil
			}
			s, err := o.session()
			if err != nil {
				return err
			}
			installs, err := findOperators(cmd.Context(), s)
			if err != nil {
				return err
			}
			if len(installs) == 0 {
				fmt.Fprintln(o.streams.Out, "operator: not found (no Deployment labelled app.kubernetes.io/part-of=echelon)")
				return nil
			}
			for _, in := range installs {
				fmt.Fprintf(o.streams.Out, "operator: %s (Deployment %s/%s)\n", in.version, in.namespace, in.name)
				if warning := skew(o.version, in.version); warning != "" {
					fmt.Fprintf(o.streams.ErrOut, "warning: %s\n", warning)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "Print the plugin's version only; do not ask the cluster.")
	return cmd
}

// findOperators lists the operator Deployments of the cluster, or of the
// current namespace when Deployments may not be listed cluster-wide.
func findOperators(ctx context.Context, s *session) ([]operatorInstall, error) {
	var list appsv1.DeploymentList
	sel := client.MatchingLabels{labelPartOf: partOf}
	err := s.client.List(ctx, &list, sel)
	if apierrors.IsForbidden(err) {
		err = s.client.List(ctx, &list, sel, client.InNamespace(s.namespace))
	}
	if err != nil {
		return nil, explain(err, s.host, "find the operator's Deployment")
	}
	var installs []operatorInstall
	for _, d := range list.Items {
		installs = append(installs, operatorInstall{namespace: d.Namespace, name: d.Name, version: deploymentVersion(&d)})
	}
	slices.SortFunc(installs, func(a, b operatorInstall) int {
		return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	return installs, nil
}

// deploymentVersion is the operator's version: the tag of its image, which
// is what runs, else the chart's version label.
func deploymentVersion(d *appsv1.Deployment) string {
	for _, c := range d.Spec.Template.Spec.Containers {
		image := c.Image
		if at := strings.Index(image, "@"); at >= 0 {
			image = image[:at]
		}
		if colon := strings.LastIndex(image, ":"); colon > strings.LastIndex(image, "/") {
			return image[colon+1:]
		}
	}
	if v := d.Labels[labelVersion]; v != "" {
		return v
	}
	return "unknown"
}

// skew warns when the plugin and the operator differ in major or minor
// version: a control or a field may be missing on one side. Versions that
// are not releases (a development build) cannot be compared, and say so.
func skew(plugin, operator string) string {
	p, op := canonical(plugin), canonical(operator)
	switch {
	case p == "" || op == "":
		return fmt.Sprintf("cannot compare plugin version %q with operator version %q: not both releases", plugin, operator)
	case semver.MajorMinor(p) != semver.MajorMinor(op):
		return fmt.Sprintf("version skew: plugin %s, operator %s: controls or status fields may differ; use the plugin of the operator's release", plugin, operator)
	}
	return ""
}

// canonical is v as a semantic version with its "v", "" when it is none.
// git describe's "v0.3.0-4-gabc1234" counts as v0.3.0's line.
func canonical(v string) string {
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	if !semver.IsValid(v) {
		return ""
	}
	return v
}
