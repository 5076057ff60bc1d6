package v1alpha1

// The marks Echelon leaves while it holds a RollingUpdate member's partition
// (docs/rollingupdate-partition.md, docs/uninstall.md).
const (
	// PartitionHolderLabel is on a StatefulSet whose partition Echelon
	// wrote; its value is the holding group's UID (a name may be longer
	// than a label value).
	PartitionHolderLabel = "echelon.dev/partition-holder"
	// PartitionsFinalizer is on a group that holds a partition, so that
	// its partitions are handed back before it goes.
	PartitionsFinalizer = "echelon.dev/partitions"
)
