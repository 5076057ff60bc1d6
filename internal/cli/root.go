// Package cli is kubectl-echelon, the kubectl plugin of Echelon: a live view
// of RolloutGroups, ScalingPolicies and DelayedDownscales, a dry run of the
// rollout planner on live objects, and the controls (pause, resume, retry,
// skip-gate, abort, promote, restart) written exactly as their documented
// fields and annotations. Flags, kubeconfig and namespaces come from
// k8s.io/cli-runtime, as in every kubectl plugin.
package cli

import (
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/echelon-operator/echelon/internal/cli/render"
)

// options is what every command shares: the kubeconfig flags, the streams
// and the clock.
type options struct {
	config  *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
	now     func() time.Time
	version string
}

// NewCommand returns the kubectl-echelon command with every subcommand.
// version is the plugin's own, set at link time.
func NewCommand(streams genericiooptions.IOStreams, version string) *cobra.Command {
	o := &options{
		config:  genericclioptions.NewConfigFlags(true),
		streams: streams,
		now:     time.Now,
		version: version,
	}
	cmd := &cobra.Command{
		Use:   "kubectl-echelon",
		Short: "See and steer Echelon's RolloutGroups, ScalingPolicies and DelayedDownscales",
		Long: `kubectl echelon shows a RolloutGroup as a tree of its members and their pods
(get, with --watch to follow it), the pods the operator would delete next and
why (plan), and steers a rollout (pause, resume, retry, skip-gate, abort,
promote, restart) by writing the fields and annotations the operator documents.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl runs a plugin as "kubectl echelon"; say so in usage lines.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl echelon"},
	}
	o.config.AddFlags(cmd.PersistentFlags())
	cmd.AddCommand(
		newGetCommand(o),
		newPlanCommand(o),
		newVersionCommand(o),
	)
	for _, c := range controls() {
		cmd.AddCommand(newControlCommand(o, c))
	}
	return cmd
}

// style is how output is drawn: in colour only on a terminal, and never
// when NO_COLOR is set (to any value, as no-color.org asks); wrapped to the
// terminal's width.
func (o *options) style() render.Style {
	_, noColor := os.LookupEnv("NO_COLOR")
	width, _ := terminalSize(o.streams.Out)
	return render.Style{Color: !noColor && o.isTerminal(), Width: width}
}

// isTerminal reports whether stdout is a terminal.
func (o *options) isTerminal() bool {
	f, ok := o.streams.Out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
