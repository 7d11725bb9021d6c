package sqlbackend

import "github.com/leasehold/leasehold/leasetype"

// ScanDependency reads a row of a backend's dependency listing: parent,
// child, the parent's state, the child's state.
func ScanDependency(s RowScanner) (*leasetype.DependencyRow, error) {
	var (
		d        leasetype.DependencyRow
		pSt, cSt string
	)
	if err := s.Scan(&d.Parent, &d.Child, &pSt, &cSt); err != nil {
		return nil, err
	}
	d.ParentState, d.ChildState = leasetype.JobState(pSt), leasetype.JobState(cSt)
	return &d, nil
}
