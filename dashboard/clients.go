package dashboard

import (
	"net/http"

	"github.com/leasehold/leasehold/leasetype"
)

type clientsData struct {
	Clients []*leasetype.ClientRow
	// Alive and Gone count Clients by liveness; Running sums the alive
	// clients' running counts.
	Alive, Gone int64
	Running     int64
}

// clients is the processes view: every working client of the fleet from
// the client registry, alive ones first.
func (h *handler) clients(r *http.Request, p *pageData) error {
	p.template, p.Title, p.Nav = "clients", "Clients", "clients"
	rows, err := h.src.Clients(r.Context())
	if err != nil {
		return err
	}
	d := &clientsData{}
	var gone []*leasetype.ClientRow
	for _, c := range rows {
		if c.Alive {
			d.Alive++
			d.Running += c.Running
			d.Clients = append(d.Clients, c)
		} else {
			d.Gone++
			gone = append(gone, c)
		}
	}
	d.Clients = append(d.Clients, gone...)
	p.Data = d
	return nil
}
