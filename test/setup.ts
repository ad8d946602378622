import { silenceNodeVersionWarning } from "../lib/local/warnings";

silenceNodeVersionWarning();
