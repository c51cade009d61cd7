#pragma once
// SIGUSR1 asks every running rank for its flight record (core/flight_recorder.h): the
// handler only sets a flag, and the background thread writes the record at its next look,
// within a cycle time. Installed only where the process leaves SIGUSR1 at its default
// (which would end the process), so an application's own handler stays in charge.

namespace chorus {

/// Installs the handler if SIGUSR1 is at its default; returns whether it did.
bool install_flight_signal();
/// Puts back the default action, if install_flight_signal() installed the handler.
void remove_flight_signal();
/// Whether SIGUSR1 arrived since the last call (and clears it).
bool flight_record_asked();

}  // namespace chorus
