package analysis

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Sample is one value of a query's result: a series of an instant vector, or
// a scalar (with no labels).
type Sample struct {
	// Metric is the series' labels as Prometheus prints them, e.g.
	// `{zone="b"}`; empty for a scalar.
	Metric string
	Value  float64
}

// Verdict is a result judged against a check's condition.
type Verdict struct {
	// Success is true when the result meets the condition.
	Success bool
	// Value describes the result for status and Events: "0.012", "no data",
	// "3 series, max 0.2 at {zone=\"b\"}".
	Value string
}

// Judge judges a query's samples against a condition. An error means the
// condition itself cannot be applied (an unknown operator or a threshold that
// is not a number), which the API's validation normally prevents.
//
// hasData: true succeeds with at least one sample, false with none. compare
// succeeds when every sample meets it, and fails with no sample at all: a
// query that returns nothing proves nothing. NaN meets only "!=".
func Judge(cond v1alpha1.CheckCondition, samples []Sample) (Verdict, error) {
	samples = slices.Clone(samples)
	slices.SortFunc(samples, func(a, b Sample) int { return cmp.Compare(a.Metric, b.Metric) })
	switch {
	case cond.HasData != nil:
		return Verdict{Success: (len(samples) > 0) == *cond.HasData, Value: describeCount(samples)}, nil
	case cond.Compare != nil:
		return judgeComparison(*cond.Compare, samples)
	}
	return Verdict{}, fmt.Errorf("condition sets neither hasData nor compare")
}

func judgeComparison(c v1alpha1.Comparison, samples []Sample) (Verdict, error) {
	threshold, err := strconv.ParseFloat(c.Threshold, 64)
	if err != nil {
		return Verdict{}, fmt.Errorf("threshold %q is not a number", c.Threshold)
	}
	meets, err := comparator(c.Operator)
	if err != nil {
		return Verdict{}, err
	}
	if len(samples) == 0 {
		return Verdict{Success: false, Value: "no data"}, nil
	}
	// Report the first sample that fails, else the one closest to failing.
	if i := slices.IndexFunc(samples, func(s Sample) bool { return !meets(s.Value, threshold) }); i >= 0 {
		return Verdict{Success: false, Value: describeSample(samples, i, "")}, nil
	}
	switch c.Operator {
	case v1alpha1.OperatorLess, v1alpha1.OperatorLessOrEqual:
		i := indexOfExtreme(samples, func(a, b float64) bool { return a > b })
		return Verdict{Success: true, Value: describeSample(samples, i, "max ")}, nil
	case v1alpha1.OperatorGreater, v1alpha1.OperatorGreaterOrEqual:
		i := indexOfExtreme(samples, func(a, b float64) bool { return a < b })
		return Verdict{Success: true, Value: describeSample(samples, i, "min ")}, nil
	}
	return Verdict{Success: true, Value: describeSample(samples, 0, "")}, nil
}

// comparator returns the comparison of an operator.
func comparator(op v1alpha1.ComparisonOperator) (func(v, t float64) bool, error) {
	switch op {
	case v1alpha1.OperatorLess:
		return func(v, t float64) bool { return v < t }, nil
	case v1alpha1.OperatorLessOrEqual:
		return func(v, t float64) bool { return v <= t }, nil
	case v1alpha1.OperatorGreater:
		return func(v, t float64) bool { return v > t }, nil
	case v1alpha1.OperatorGreaterOrEqual:
		return func(v, t float64) bool { return v >= t }, nil
	case v1alpha1.OperatorEqual:
		return func(v, t float64) bool { return v == t }, nil
	case v1alpha1.OperatorNotEqual:
		return func(v, t float64) bool { return v != t }, nil
	}
	return nil, fmt.Errorf("unknown operator %q", op)
}

func indexOfExtreme(samples []Sample, beyond func(a, b float64) bool) int {
	best := 0
	for i, s := range samples {
		if beyond(s.Value, samples[best].Value) {
			best = i
		}
	}
	return best
}

func describeCount(samples []Sample) string {
	switch len(samples) {
	case 0:
		return "no data"
	case 1:
		return formatValue(samples[0].Value)
	}
	return fmt.Sprintf("%d series", len(samples))
}

// describeSample is the value of samples[i], with its series when the result
// has several.
func describeSample(samples []Sample, i int, qualifier string) string {
	s := samples[i]
	if len(samples) == 1 {
		return formatValue(s.Value)
	}
	return fmt.Sprintf("%d series, %s%s at %s", len(samples), qualifier, formatValue(s.Value), s.Metric)
}

func formatValue(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// DescribeCondition says what the condition requires, for messages:
// "< 0.05", "has data", "no data".
func DescribeCondition(cond v1alpha1.CheckCondition) string {
	switch {
	case cond.HasData != nil && *cond.HasData:
		return "has data"
	case cond.HasData != nil:
		return "no data"
	case cond.Compare != nil:
		return string(cond.Compare.Operator) + " " + cond.Compare.Threshold
	}
	return "no condition"
}
