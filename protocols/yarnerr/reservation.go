package yarnerr

// reservationDisabled is ClientRMService.checkReservationSystem's message.
const reservationDisabled = "Reservation is not enabled. Please enable & try again"

// ReservationDisabled is what ClientRMService's reservation calls answer
// first while the RM has no reservation system
// (yarn.resourcemanager.reservation-system.enable false, YARN's default):
// the YarnException RPCUtil.getRemoteException makes of the message. A
// knit-rm never has one.
func ReservationDisabled() *Error { return YarnException.New(reservationDisabled) }
