package yarnerr

import "testing"

func TestReservationDisabledIsCheckReservationSystemsYarnException(t *testing.T) {
	err := ReservationDisabled()
	if err.Class != YarnException || err.Message != "Reservation is not enabled. Please enable & try again" || err.Err != nil {
		t.Errorf("ReservationDisabled() = %#v", err)
	}
}
