package nvmldl

// unavailable is an API whose every call fails with why the library
// could not be opened.
type unavailable struct{ err error }

func (u unavailable) Init() error                     { return u.err }
func (u unavailable) DeviceCount() (int, error)       { return 0, u.err }
func (u unavailable) TotalEnergy(int) (uint64, error) { return 0, u.err }
func (u unavailable) Shutdown() error                 { return nil }
