import { silenceNodeVersionWarning } from "../lib/operator/warnings";

silenceNodeVersionWarning();
