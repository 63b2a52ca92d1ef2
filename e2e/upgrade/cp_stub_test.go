package upgrade

type cpProc struct{}
